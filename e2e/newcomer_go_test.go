// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNewcomerGo runs the newcomer test (newcomer_test.go) with the Go
// service of newcomer/go, otelhttp and the hooks as hooks/README.md wires
// them.
func TestNewcomerGo(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "newcomer")
	out, err := exec.Command("go", "build", "-o", bin, "./newcomer/go").CombinedOutput() //nolint:gosec // G204: go build of the test's service into t.TempDir
	require.NoError(t, err, "building the Go newcomer service:\n%s", out)
	runNewcomer(t, func(t *testing.T, name, otlp string, env ...string) *appService {
		return startApp(t, name, otlp, []string{bin}, env...)
	})
}
