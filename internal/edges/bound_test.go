// SPDX-License-Identifier: Apache-2.0

package edges

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/errorownership/errorownership/store"
)

func TestMostRecentKeepsTheBound(t *testing.T) {
	at := func(s int) store.EdgeEstimate {
		return store.EdgeEstimate{Service: "s", PeerService: string(rune('a' + s)), LastSeen: time.Unix(int64(s), 0)}
	}
	peers := func(est []store.EdgeEstimate) (out []string) {
		for _, e := range est {
			out = append(out, e.PeerService)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		in   []store.EdgeEstimate
		max  int
		want []string
	}{
		{"within the bound, untouched and in order", []store.EdgeEstimate{at(2), at(0), at(1)}, 3, []string{"c", "a", "b"}},
		{"past the bound, the most recent kept", []store.EdgeEstimate{at(2), at(0), at(3), at(1)}, 2, []string{"d", "c"}},
		{"empty", nil, 1, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, peers(mostRecent(tc.in, tc.max)))
		})
	}
}
