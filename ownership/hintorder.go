// SPDX-License-Identifier: Apache-2.0

package ownership

import (
	"cmp"
	"slices"
	"strings"
)

// CompareHintEdges orders a hints document's edges: by operation, peer
// service and peer operation, byte-wise, so that one model encodes to the
// same bytes wherever it is encoded (and so to the same ETag).
func CompareHintEdges(a, b HintEdge) int {
	return cmp.Or(strings.Compare(a.Operation, b.Operation), strings.Compare(a.PeerService, b.PeerService),
		strings.Compare(a.PeerOperation, b.PeerOperation))
}

// SortHintEdges sorts edges by CompareHintEdges.
func SortHintEdges(edges []HintEdge) { slices.SortFunc(edges, CompareHintEdges) }
