// SPDX-License-Identifier: Apache-2.0

package configcheck

import (
	"testing"
	"time"
)

func TestTooShort(t *testing.T) {
	tests := []struct {
		name string
		d    time.Duration
		want string
	}{
		{"zero", 0, "flush_interval: 0s must be positive, such as 10s"},
		{"negative", -time.Second, "flush_interval: -1s must be positive, such as 10s"},
		{"bare number", 10, "flush_interval: 10ns must be at least 100ms; a bare number is read as nanoseconds; write a unit, such as 10s"},
		{"below the minimum", 50 * time.Millisecond, "flush_interval: 50ms must be at least 100ms, such as 10s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := TooShort("flush_interval", tt.d, 100*time.Millisecond, "10s").Error()
			if got != tt.want {
				t.Errorf("TooShort(%v) = %q, want %q", tt.d, got, tt.want)
			}
		})
	}
}

func TestBareNumberOnlyBelowAMillisecond(t *testing.T) {
	for _, d := range []time.Duration{0, time.Millisecond, time.Second} {
		if got := BareNumber(d, "1s"); got != "" {
			t.Errorf("BareNumber(%v) = %q, want none", d, got)
		}
	}
}
