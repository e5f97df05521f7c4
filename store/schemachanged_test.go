// SPDX-License-Identifier: Apache-2.0

package store

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestSchemaChanged: only the error of an object replaced under a running
// query is read as a schema that changed, wrapped or not.
func TestSchemaChanged(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"function replaced by a migration", &pgconn.PgError{Code: "XX000", Message: "cache lookup failed for function 16473"}, true},
		{"wrapped", fmt.Errorf("store: edge model: %w", &pgconn.PgError{Code: "XX000", Message: "cache lookup failed for relation 1"}), true},
		{"another internal error", &pgconn.PgError{Code: "XX000", Message: "could not read block 0"}, false},
		{"a missing function", &pgconn.PgError{Code: "42883", Message: "function edge_model does not exist"}, false},
		{"not PostgreSQL's", errors.New("cache lookup failed"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := schemaChanged(tc.err); got != tc.want {
				t.Errorf("schemaChanged(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
