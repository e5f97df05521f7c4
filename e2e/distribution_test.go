// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestAddingAContribComponentBuilds adds a contrib component of the user's
// own to builder-config.yaml, as docs/deployment.md says (the spanmetrics
// connector, at the contrib release the others are at), builds the
// distribution with the Collector Builder, and finds the component and
// ours in the binary's components.
func TestAddingAContribComponentBuilds(t *testing.T) {
	buildCollector(t) // installs the builder, as make otelcol does
	root, err := filepath.Abs(repoRoot)
	require.NoError(t, err)
	manifest, err := os.ReadFile(filepath.Join(root, "builder-config.yaml")) //nolint:gosec // G304: the repository's own manifest
	require.NoError(t, err)
	out := t.TempDir()
	// The manifest's relative paths are the repository's; the copy lives
	// elsewhere, so they become absolute.
	cfg := strings.NewReplacer(
		"output_path: ./build/otelcol-errorownership", "output_path: "+out,
		"path: ./", "path: "+root,
		"=> ../../", "=> "+root+"/",
	).Replace(string(manifest))
	cfg = strings.Replace(cfg, "\nconnectors:\n", "\nconnectors:\n  - gomod: github.com/open-telemetry/opentelemetry-collector-contrib/connector/spanmetricsconnector v0.165.1\n", 1)
	require.Contains(t, cfg, "spanmetricsconnector", "the manifest has a connectors section")
	path := filepath.Join(out, "builder-config.yaml")
	require.NoError(t, os.WriteFile(path, []byte(cfg), 0o600)) //nolint:gosec // G703: a file in the test's own temporary directory

	gobin, err := exec.Command("go", "env", "GOPATH").Output()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, filepath.Join(strings.TrimSpace(string(gobin)), "bin", "builder"), "--config", path) //nolint:gosec // G204: the builder make otelcol installed, on a manifest this test wrote
	build.Env = append(os.Environ(), "GOWORK=off")
	log, err := build.CombinedOutput()
	require.NoError(t, err, "building the distribution with spanmetricsconnector added:\n%s", log)

	components, err := exec.CommandContext(ctx, filepath.Join(out, "otelcol-errorownership"), "components").Output() //nolint:gosec // G204: the binary this test built
	require.NoError(t, err)
	for _, name := range []string{"name: span_metrics\n", "name: errorownership\n", "name: errorownership_hints", "name: prometheus\n"} {
		require.Contains(t, string(components), name)
	}
}
