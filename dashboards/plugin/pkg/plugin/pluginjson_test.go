// SPDX-License-Identifier: Apache-2.0

package plugin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestPluginJSON: the plugin.json Grafana reads — the source's and the
// committed build's — names this backend, and the build holds the
// frontend module.
func TestPluginJSON(t *testing.T) {
	for _, path := range []string{"../../src/plugin.json", "../../dist/plugin.json"} {
		b, err := os.ReadFile(path) //nolint:gosec // G304: the plugin.json of the source or of the committed build
		if err != nil {
			t.Fatalf("%v (the frontend build is committed; make plugin writes it)", err)
		}
		var p struct {
			ID, Type, Executable string
			Backend              bool
		}
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if p.ID != ID || p.Type != "datasource" || !p.Backend || p.Executable != "gpx_errorownership" {
			t.Errorf("%s: %+v, want id %s, a datasource with the backend gpx_errorownership", path, p, ID)
		}
	}
	for _, f := range []string{"module.js", "img/logo.svg"} {
		if _, err := os.Stat(filepath.Join("../../dist", f)); err != nil {
			t.Errorf("the committed build lacks %s: %v", f, err)
		}
	}
}
