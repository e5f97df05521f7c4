// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// newcomerJavaDir is the Java service of the newcomer test. `make
// hooks-deps` builds it into its target/ (ignored): `mvn -f hooks-java
// install` puts the hooks' jar in the local Maven repository, as
// hooks-java/README.md says, and the service's own `mvn package` takes it
// from there by its coordinates and writes the classpath and the agent jar.
var newcomerJavaDir = filepath.Join(repoRoot, "e2e", "newcomer", "java")

// TestNewcomerJava runs the newcomer test (newcomer_test.go) with
// newcomer/java: embedded Jetty 12 and java.net.http.HttpClient through
// the hooks, under the OpenTelemetry Java agent started as
// hooks-java/README.md says.
func TestNewcomerJava(t *testing.T) {
	target := filepath.Join(newcomerJavaDir, "target")
	if _, err := os.Stat(filepath.Join(target, ".deps")); err != nil {
		t.Fatalf("e2e/newcomer/java/target/.deps is missing: run `make hooks-deps` (it installs hooks-java into the local Maven repository and packages the service)")
	}
	cp, err := os.ReadFile(filepath.Join(target, "classpath.txt")) //nolint:gosec // G304: the classpath `make hooks-deps` wrote
	require.NoError(t, err)
	argv := []string{
		"java",
		"-javaagent:" + filepath.Join(target, "opentelemetry-javaagent.jar"),
		// The README's one setting: the hooks make each attempt's CLIENT
		// span, so the agent's span for the same HttpClient call is off.
		// Everything else, the hint client included, runs at the agent's
		// defaults.
		"-Dotel.instrumentation.java-http-client.enabled=false",
		"-cp", filepath.Join(target, "classes") + string(os.PathListSeparator) + strings.TrimSpace(string(cp)),
		"newcomer.Newcomer",
	}
	runNewcomer(t, func(t *testing.T, name, otlp string, env ...string) *appService {
		return startApp(t, name, otlp, argv, env...)
	})
}
