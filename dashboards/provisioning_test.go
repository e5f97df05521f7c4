// SPDX-License-Identifier: Apache-2.0

package dashboards

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/errorownership/errorownership/dashboards/plugin/pkg/plugin"
	"github.com/errorownership/errorownership/store"
)

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path) //nolint:gosec // G304: a provisioning file of this module, named by the test
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestProvisioningFitsTheComposeFile checks, without Docker or Grafana,
// that docker-compose.yaml and the provisioning files agree: Grafana's
// mounts are where the provisioning files and Grafana look, the data
// sources' settings (with the compose file's environment substituted, as
// Grafana substitutes it) are valid for the plugin, and the PostgreSQL data
// source's minimum interval is the store's bucket.
func TestProvisioningFitsTheComposeFile(t *testing.T) {
	var compose struct {
		Services map[string]struct {
			Environment map[string]string `yaml:"environment"`
			Volumes     []string          `yaml:"volumes"`
			Command     []string          `yaml:"command"`
		} `yaml:"services"`
	}
	readYAML(t, "docker-compose.yaml", &compose)
	grafana, ok := compose.Services["grafana"]
	if !ok {
		t.Fatal("docker-compose.yaml has no grafana service")
	}
	mounts := map[string]string{}
	for _, v := range grafana.Volumes {
		parts := strings.Split(v, ":")
		mounts[parts[0]] = parts[1]
	}
	var providers struct {
		Providers []struct {
			Options struct{ Path string } `yaml:"options"`
		} `yaml:"providers"`
	}
	readYAML(t, "provisioning/dashboards/errorownership.yaml", &providers)
	for src, want := range map[string]string{
		"./plugin/dist":              "/var/lib/grafana/plugins/" + plugin.ID,
		"./provisioning/datasources": "/etc/grafana/provisioning/datasources",
		"./provisioning/dashboards":  "/etc/grafana/provisioning/dashboards",
		"./json":                     providers.Providers[0].Options.Path,
	} {
		if mounts[src] != want {
			t.Errorf("grafana mounts %s at %q, want %q", src, mounts[src], want)
		}
	}
	if got := grafana.Environment["GF_PLUGINS_ALLOW_LOADING_UNSIGNED_PLUGINS"]; got != plugin.ID {
		t.Errorf("unsigned plugins allowed: %q, want %s", got, plugin.ID)
	}

	raw, err := os.ReadFile("provisioning/datasources/errorownership.yaml")
	if err != nil {
		t.Fatal(err)
	}
	expanded := regexp.MustCompile(`\$\{(\w+)\}`).ReplaceAllStringFunc(string(raw), func(m string) string {
		name := m[2 : len(m)-1]
		v, ok := grafana.Environment[name]
		if !ok {
			t.Errorf("the data sources use %s, which the compose file does not set", name)
		}
		return v
	})
	var sources struct {
		Datasources []struct {
			UID            string            `yaml:"uid"`
			Type           string            `yaml:"type"`
			URL            string            `yaml:"url"`
			JSONData       map[string]any    `yaml:"jsonData"`
			SecureJSONData map[string]string `yaml:"secureJsonData"`
		} `yaml:"datasources"`
	}
	if err := yaml.Unmarshal([]byte(expanded), &sources); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	uids := map[string]string{}
	for _, ds := range sources.Datasources {
		uids[ds.UID] = ds.Type
	}
	for _, ds := range sources.Datasources {
		seen[ds.Type] = true
		switch ds.Type {
		case PrometheusType:
			// Exemplars link by the label the prometheus exporter gives an
			// exemplar's trace ID to a trace data source provisioned here.
			dests, _ := ds.JSONData["exemplarTraceIdDestinations"].([]any)
			if len(dests) != 1 {
				t.Fatalf("Prometheus data source: exemplarTraceIdDestinations %v, want one", dests)
			}
			dest := dests[0].(map[string]any)
			if dest["name"] != "trace_id" || uids[fmt.Sprint(dest["datasourceUid"])] != "tempo" {
				t.Errorf("Prometheus exemplars link by %v to data source %v (%s), want trace_id to the Tempo data source", dest["name"], dest["datasourceUid"], uids[fmt.Sprint(dest["datasourceUid"])])
			}
			if ds.URL != "http://prometheus:9090" {
				t.Errorf("Prometheus data source at %q, want the compose file's prometheus:9090", ds.URL)
			}
		case PostgresType:
			interval, err := time.ParseDuration(ds.JSONData["timeInterval"].(string))
			if err != nil || interval != store.DefaultConfig().Bucket {
				t.Errorf("PostgreSQL data source: timeInterval %v, want the store's bucket %v", ds.JSONData["timeInterval"], store.DefaultConfig().Bucket)
			}
			if ds.URL != "postgres:5432" {
				t.Errorf("PostgreSQL data source at %q, want the compose file's postgres:5432", ds.URL)
			}
		case plugin.ID:
			b, err := json.Marshal(ds.JSONData)
			if err != nil {
				t.Fatal(err)
			}
			s, err := plugin.LoadSettings(b, ds.SecureJSONData)
			if err != nil {
				t.Errorf("the errorownership data source's settings: %v", err)
			}
			if s.Password == "" || !strings.Contains(s.DSN, "@postgres:5432/errorownership") {
				t.Errorf("the errorownership data source: dsn %q, password given %v", s.DSN, s.Password != "")
			}
		}
	}
	if !seen[PostgresType] || !seen[plugin.ID] || !seen[PrometheusType] || !seen["tempo"] {
		t.Errorf("data sources %v, want PostgreSQL, errorownership, Prometheus and Tempo", seen)
	}
	sim := strings.Join(compose.Services["simulator"].Command, " ")
	collector, err := os.ReadFile("compose/otelcol.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, port := range []string{"4318", "4320"} {
		if !strings.Contains(sim, "collector:"+port) || !strings.Contains(string(collector), "0.0.0.0:"+port) {
			t.Errorf("the simulator (%s) and the collector's configuration disagree on port %s", sim, port)
		}
	}
	// Prometheus scrapes the collector's prometheus exporter and its own
	// telemetry, and loads the rules the compose file mounts.
	var prom struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	readYAML(t, "compose/prometheus.yml", &prom)
	var targets []string
	for _, sc := range prom.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			targets = append(targets, st.Targets...)
		}
	}
	if !slices.Equal(targets, []string{"collector:9464", "collector:8888"}) ||
		!strings.Contains(string(collector), "0.0.0.0:9464") || !strings.Contains(string(collector), "METRICS_PORT:-8888") {
		t.Errorf("Prometheus scrapes %v; the collector's prometheus exporter listens on 9464, its telemetry on 8888", targets)
	}
	const mount = "./rules:/etc/prometheus/rules:ro"
	if !slices.Contains(compose.Services["prometheus"].Volumes, mount) ||
		!slices.Equal(prom.RuleFiles, []string{"/etc/prometheus/rules/" + RulesFile}) {
		t.Errorf("Prometheus loads rules %v with volumes %v: want %s mounted and its %s loaded",
			prom.RuleFiles, compose.Services["prometheus"].Volumes, mount, RulesFile)
	}
}
