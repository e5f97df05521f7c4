// SPDX-License-Identifier: Apache-2.0

package configkeys

import (
	"cmp"
	"slices"
	"strings"
)

// Near finds the names near a misspelt one, so that an error can say "did
// you mean": the CLI's flags and the components' configuration keys word it
// alike. It returns up to n of candidates near name, nearest first: those
// within an edit distance of a third of name's length (at least 2), or
// that hold name or are held by it, ignoring case, when the shorter of the
// two has three letters or more.
func Near(name string, candidates []string, n int) []string {
	type scored struct {
		name string
		d    int
	}
	var near []scored
	lname := strings.ToLower(name)
	limit := max(2, len([]rune(name))/3)
	for _, c := range candidates {
		lc := strings.ToLower(c)
		d := distance(lname, lc)
		short := min(len([]rune(lname)), len([]rune(lc)))
		if d <= limit || (short >= 3 && (strings.Contains(lc, lname) || strings.Contains(lname, lc))) {
			near = append(near, scored{c, d})
		}
	}
	slices.SortStableFunc(near, func(a, b scored) int { return cmp.Or(cmp.Compare(a.d, b.d), cmp.Compare(a.name, b.name)) })
	var out []string
	for i := 0; i < len(near) && i < n; i++ {
		out = append(out, near[i].name)
	}
	return out
}

// distance is the Levenshtein distance between a and b, in runes.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
