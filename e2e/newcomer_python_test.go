// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"os"
	"path/filepath"
	"testing"
)

// newcomerPythonDir holds the Python newcomer service and the venv `make
// hooks-deps` makes for it as hooks-python/README.md says: the hooks from
// their wheel, opentelemetry-distro and the instrumentations
// `opentelemetry-bootstrap -a install` picks, at their defaults (the old
// HTTP semantic conventions: requests writes http.url, not server.address).
var newcomerPythonDir = filepath.Join("newcomer", "python")

// TestNewcomerPython runs the newcomer test (newcomer_test.go) with a Flask
// service calling its dependencies with requests, under
// opentelemetry-instrument.
func TestNewcomerPython(t *testing.T) {
	venv := filepath.Join(newcomerPythonDir, ".venv")
	if _, err := os.Stat(filepath.Join(venv, ".deps")); err != nil {
		t.Fatalf("e2e/%s/.venv is missing: run `make hooks-deps` (it builds the hooks' wheel and installs it with the service's packages)", newcomerPythonDir)
	}
	bin, err := filepath.Abs(filepath.Join(venv, "bin"))
	if err != nil {
		t.Fatal(err)
	}
	app, err := filepath.Abs(filepath.Join(newcomerPythonDir, "app.py"))
	if err != nil {
		t.Fatal(err)
	}
	runNewcomer(t, func(t *testing.T, name, otlp string, env ...string) *appService {
		return startApp(t, name, otlp,
			[]string{filepath.Join(bin, "opentelemetry-instrument"), filepath.Join(bin, "python"), app},
			append([]string{
				// The README's settings for a collector's OTLP/HTTP
				// receiver; the Python SDK's default is gRPC.
				"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
				// The test's collector takes traces only.
				"OTEL_METRICS_EXPORTER=none",
				"OTEL_LOGS_EXPORTER=none",
			}, env...)...)
	})
}
