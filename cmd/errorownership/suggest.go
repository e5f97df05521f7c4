// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"strings"

	"github.com/errorownership/errorownership/internal/configkeys"
)

// unknownName says that name is not among known, naming the nearest
// candidates, so that a typo costs one look rather than a search.
func unknownName(what, flag, name string, known []string, where string) error {
	near := configkeys.Near(name, known, 3)
	switch {
	case len(near) > 0:
		return fmt.Errorf("%s %s: no %s %q %s; did you mean %s?", flag, name, what, name, where, quoteJoin(near))
	case len(known) > 0 && len(known) <= 10:
		return fmt.Errorf("%s %s: no %s %q %s; there are %s", flag, name, what, name, where, quoteJoin(known))
	default:
		return fmt.Errorf("%s %s: no %s %q %s (%d others; list them with shell completion: %s <TAB>)", flag, name, what, name, where, len(known), flag)
	}
}

func quoteJoin(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}
