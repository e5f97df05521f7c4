// SPDX-License-Identifier: Apache-2.0

package soak

import "testing"

func TestPick(t *testing.T) {
	tests := []struct {
		env  string
		want int
	}{
		{"", 1},
		{"0", 1},
		{"false", 1},
		{"1", 2},
		{"yes", 2},
	}
	for _, tt := range tests {
		t.Run("ERROROWNERSHIP_SOAK="+tt.env, func(t *testing.T) {
			t.Setenv(Env, tt.env)
			if got := Pick(1, 2); got != tt.want {
				t.Fatalf("Pick(1, 2) = %d, want %d", got, tt.want)
			}
		})
	}
}
