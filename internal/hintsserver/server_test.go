// SPDX-License-Identifier: Apache-2.0

package hintsserver

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestServiceParam(t *testing.T) {
	tests := []struct {
		raw, want string
		problem   string // a fragment of the problem; "" for none
	}{
		{"service=checkout", "checkout", ""},
		{"service=check%20out", "check out", ""},
		{"service=a+b", "a b", ""},
		{"servic%65=checkout", "checkout", ""},
		{"service=caf%C3%A9", "café", ""},
		{"&service=x&&", "x", ""},
		{"service=x&token=abc", "x", ""},
		{"token=%zz&service=x", "x", ""},
		{"", "", ""},
		{"service", "", ""},
		{"other=1", "", "unknown query parameter"},
		{"a=1&service=x", "", "unknown query parameter"},
		{"service=x&Token=abc", "", "unknown query parameter"},
		{"=x&service=x", "", "unknown query parameter"},
		{"o%zz=1&service=x", "", "malformed"},
		{"service=%zz", "", "malformed"},
		{"service=%00", "", "control characters"},
		{"service=%ff", "", "not valid UTF-8"},
		{"service=a%09b", "", "control characters"},
		{"service=a&service=b", "", "more than once"},
		{"service=&service=b", "", "more than once"},
	}
	for _, tt := range tests {
		got, problem := serviceParam(tt.raw, []string{"token"})
		assert.Equal(t, tt.want, got, tt.raw)
		if tt.problem == "" {
			assert.Empty(t, problem, tt.raw)
		} else {
			assert.Contains(t, problem, tt.problem, tt.raw)
		}
	}
}
