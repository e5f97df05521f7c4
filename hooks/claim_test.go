// SPDX-License-Identifier: Apache-2.0

package hooks

import (
	"testing"

	"github.com/errorownership/errorownership/ownership"
)

const (
	claimed   = ownership.ClaimClaimed
	unclaimed = ownership.ClaimUnclaimed
	missing   = ownership.ClaimMissing
)

func TestModeText(t *testing.T) {
	for _, m := range []ownership.Mode{ownership.ModeUnknown, ownership.ModeFailClose, ownership.ModeFailOpen} {
		var got ownership.Mode
		b, _ := m.MarshalText()
		if err := got.UnmarshalText(b); err != nil || got != m {
			t.Errorf("%v round trip = %v, %v", m, got, err)
		}
	}
	m := ownership.ModeFailOpen
	if err := m.UnmarshalText([]byte("sometimes")); err != nil || m != ownership.ModeUnknown {
		t.Errorf("unknown mode read as %v, %v", m, err)
	}
}
