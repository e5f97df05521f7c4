// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"os"
	"path/filepath"
	"testing"
)

// newcomerNodeDir holds the Node.js service of the newcomer test: express
// under @opentelemetry/auto-instrumentations-node, set up from
// hooks-node/README.md alone, the hooks installed from their npm pack
// tarball. `make hooks-deps` packs the hooks into its build/ and installs
// it there (npm ci from its lock), once per change of the hooks.
var newcomerNodeDir = filepath.Join(repoRoot, "e2e", "newcomer", "node")

// TestNewcomerNode runs the newcomer test (newcomer_test.go) with the
// Node.js service, started as the README says: node --require ./tracing.js
// app.js, the SDK configured by the OTEL_* variables alone.
func TestNewcomerNode(t *testing.T) {
	if _, err := os.Stat(filepath.Join(newcomerNodeDir, "node_modules", ".deps")); err != nil {
		t.Fatal("e2e/newcomer/node/node_modules/.deps is missing: run `make hooks-deps` (it packs hooks-node and installs the service with the tarball)")
	}
	runNewcomer(t, func(t *testing.T, name, otlp string, env ...string) *appService {
		return startApp(t, name, otlp, []string{
			"node", "--require", filepath.Join(newcomerNodeDir, "tracing.js"), filepath.Join(newcomerNodeDir, "app.js"),
		}, env...)
	})
}
