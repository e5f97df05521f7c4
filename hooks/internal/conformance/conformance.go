// SPDX-License-Identifier: Apache-2.0

// Package conformance reads the conformance vectors (the repository's
// conformance/ directory): the rules of docs/design.md as data, which the
// hooks of every language run. The Go hooks' tests read them through it.
package conformance

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// Dir returns the conformance directory: CONFORMANCE_DIR if set, else the
// one at the root of the repository this file is in.
func Dir() string {
	if d := os.Getenv("CONFORMANCE_DIR"); d != "" {
		return d
	}
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "conformance")
}

// Load decodes the vector file name (such as "claim.json") into v.
func Load(name string, v any) error {
	b, err := os.ReadFile(filepath.Join(Dir(), name)) //nolint:gosec // a test reads the vector file it names
	if err != nil {
		return fmt.Errorf("conformance vectors: %w", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("conformance vectors %s: %w", name, err)
	}
	return nil
}
