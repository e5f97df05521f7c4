// SPDX-License-Identifier: Apache-2.0

package hooksgrpc

import "testing"

func TestTargetAddress(t *testing.T) {
	for target, want := range map[string]string{
		"127.0.0.1:5000":                "127.0.0.1:5000",
		"dns:///checkout.prod:443":      "checkout.prod:443",
		"dns://8.8.8.8/checkout:443":    "checkout:443",
		"passthrough:///127.0.0.1:5000": "127.0.0.1:5000",
		"checkout":                      "checkout",
		"[::1]:9000":                    "[::1]:9000",
	} {
		if got := targetAddress(target); got != want {
			t.Errorf("targetAddress(%q) = %q, want %q", target, got, want)
		}
	}
}
