// SPDX-License-Identifier: Apache-2.0

package scenario

import "github.com/errorownership/errorownership/ownership"

// truth is what the simulator knows happened, for the package's tests to
// check the hand-computed Expected figures against: it is the generator's
// own bookkeeping, not an analysis of the spans.
type truth struct {
	services map[string]*serviceTruth
	edges    map[edgeKey]*edgeTruth
	failures []failureTruth
}

// edgeKey is an edge: (service, operation) → (peer, peer operation).
type edgeKey struct{ service, operation, peer, peerOperation string }

type serviceTruth struct {
	served, retries, failed int
	sent                    map[string]int // error_ownership.claim.sent of failed requests, "missing" if none
}

// edgeTruth counts, over inbound requests, those whose logical call on the
// edge failed while no other call of the request failed (n) and, of those,
// the ones that failed themselves (k): the evidence the edge model judges.
type edgeTruth struct{ n, k int }

// failureTruth is one failed inbound request and the logical calls it made.
type failureTruth struct {
	service string
	calls   []callRecord
}

func newTruth() truth {
	return truth{services: map[string]*serviceTruth{}, edges: map[edgeKey]*edgeTruth{}}
}

// record notes one inbound request of service.
func (t *truth) record(service string, retry, failed bool, sent ownership.Claim, calls []callRecord) {
	s := t.services[service]
	if s == nil {
		s = &serviceTruth{sent: map[string]int{}}
		t.services[service] = s
	}
	s.served++
	if retry {
		s.retries++
	}
	if failed {
		s.failed++
		s.sent[sent.String()]++
		t.failures = append(t.failures, failureTruth{service: service, calls: calls})
	}
	failedCalls := 0
	for _, c := range calls {
		if c.failed {
			failedCalls++
		}
	}
	for _, c := range calls {
		if !c.failed || failedCalls > 1 {
			continue
		}
		e := t.edges[c.edge]
		if e == nil {
			e = &edgeTruth{}
			t.edges[c.edge] = e
		}
		e.n++
		if failed {
			e.k++
		}
	}
}
