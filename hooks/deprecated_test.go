// SPDX-License-Identifier: Apache-2.0

package hooks_test

import (
	"testing"

	"github.com/errorownership/errorownership/hooks"
	"github.com/errorownership/errorownership/ownership"
)

// An application written against the hooks before the mode moved to
// ownership still compiles and means the same.
func TestDeprecatedModeAliases(t *testing.T) {
	var m hooks.Mode = ownership.ModeFailOpen //nolint:staticcheck // ST1023: the deprecated alias is spelt out, it is what is tested
	cases := []struct {
		name string
		old  hooks.Mode
		new  ownership.Mode
	}{
		{"unknown", hooks.ModeUnknown, ownership.ModeUnknown},
		{"fail_close", hooks.ModeFailClose, ownership.ModeFailClose},
		{"fail_open", hooks.ModeFailOpen, ownership.ModeFailOpen},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.old != c.new || c.old.String() != c.name || hooks.ParseMode(c.name) != c.new {
				t.Errorf("hooks.%v is not ownership.%v", c.old, c.new)
			}
		})
	}
	if m != ownership.ModeFailOpen {
		t.Errorf("a hooks.Mode does not hold an ownership.Mode")
	}
	if hooks.DefaultRatio != ownership.DefaultRetryRatio || hooks.DefaultMinRetriesPerSecond != ownership.DefaultMinRetriesPerSecond {
		t.Errorf("the deprecated budget defaults differ from ownership's")
	}
}
