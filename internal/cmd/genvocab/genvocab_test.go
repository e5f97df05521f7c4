// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// root is the repository's root, from this package's directory.
const root = "../../.."

// TestGenerateIsDeterministic: two runs write the same bytes, or
// .ci/check-generated, which regenerates and looks for changes, would fail
// at random.
func TestGenerateIsDeterministic(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, source))
	if err != nil {
		t.Fatal(err)
	}
	r, err := parse(b)
	if err != nil {
		t.Fatal(err)
	}
	first, err := generate(r)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		again, err := generate(r)
		if err != nil {
			t.Fatal(err)
		}
		for path, src := range first {
			if string(again[path]) != string(src) {
				t.Fatalf("%s differs between two runs", path)
			}
		}
	}
	for path, src := range first {
		if !strings.Contains(string(src), "SPDX-License-Identifier: Apache-2.0") || !strings.Contains(string(src), notice) {
			t.Errorf("%s lacks the SPDX line or the generated notice", path)
		}
	}
}

const attrsTemplate = `
groups:
  - id: g
    type: attribute_group
    brief: b
    entries:
%s`

func attr(id, extra string) string {
	return "      - {id: " + id + ", type: string, brief: b, names: {go: G" + strings.NewReplacer(".", "", "_", "").Replace(id) +
		", const: C_" + strings.NewReplacer(".", "_").Replace(id) + "}" + extra + "}\n"
}

// TestRegistryRules: the registry the generator refuses, by rule.
func TestRegistryRules(t *testing.T) {
	tests := []struct {
		name    string
		entries string
		wantErr string // "" for none
	}{
		{"ours, nested", attr("error_ownership.claim.sent", "") + attr("error_ownership.claim.reason", ""), ""},
		{"attribute and namespace", attr("error_ownership.claim", "") + attr("error_ownership.claim.reason", ""),
			"error_ownership.claim is both an attribute and the namespace of error_ownership.claim.reason"},
		{"outside our namespace", attr("error.claim", ""), "lies outside error_ownership.*"},
		{"semconv may be outside", attr("http.request.resend_count", ", semconv: true"), ""},
		{"legacy may be both", attr("error_ownership.claim.sent", "") +
			attr("error.claim", ", deprecated: {reason: renamed, renamed_to: error_ownership.claim.sent}") +
			attr("error.claim.reason", ", deprecated: {reason: renamed, renamed_to: error_ownership.claim.sent}"), ""},
		{"legacy renamed to nothing", attr("error.claim", ", deprecated: {reason: renamed, renamed_to: error_ownership.nothing}"),
			"renamed_to \"error_ownership.nothing\" is no current attribute"},
		{"not snake case", attr("error_ownership.Claim", ""), "lower-case dot-separated snake_case"},
		{"unknown key", "      - {id: error_ownership.x, type: string, brief: b, nmes: {}}\n", "field nmes not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse([]byte(strings.Replace(attrsTemplate, "%s", tt.entries, 1)))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.wantErr != "" && err == nil:
				t.Fatalf("accepted; want an error with %q", tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
				t.Fatalf("error %q; want one with %q", err, tt.wantErr)
			}
		})
	}
}
