package main

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// unknownName says that name is not among known, naming the nearest
// candidates, so that a typo costs one look rather than a search.
func unknownName(what, flag, name string, known []string, where string) error {
	near := nearNames(name, known, 3)
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

// nearNames returns up to n of candidates near name, nearest first: those
// within an edit distance of a third of name's length (at least 2), or
// that hold name or are held by it, ignoring case, when the shorter of the
// two has three letters or more.
func nearNames(name string, candidates []string, n int) []string {
	type scored struct {
		name string
		d    int
	}
	var near []scored
	lname := strings.ToLower(name)
	limit := max(2, len([]rune(name))/3)
	for _, c := range candidates {
		lc := strings.ToLower(c)
		d := editDistance(lname, lc)
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

// editDistance is the Levenshtein distance between a and b, in runes.
func editDistance(a, b string) int {
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
