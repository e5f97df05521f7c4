// SPDX-License-Identifier: Apache-2.0

package plugin

import (
	"strings"
	"testing"
	"time"

	"github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/ownership"
)

func TestLoadSettings(t *testing.T) {
	const dsn = `{"store": {"dsn": "postgres://grafana@db.internal:5432/errorownership"}`
	for _, tc := range []struct {
		name, json string
		secure     map[string]string
		errs       []string // substrings of the error; none: valid
		check      func(t *testing.T, s Settings)
	}{
		{
			name: "defaults are the collector's",
			json: dsn + `}`,
			check: func(t *testing.T, s Settings) {
				if s.Model != dependencyanalysis.DefaultConfig().EdgeModel {
					t.Errorf("model %+v, want the engine's defaults", s.Model)
				}
				if s.HintsTTL != 30*time.Second || s.RetryBudget != ownership.DefaultRetryBudget() {
					t.Errorf("hints ttl %v, budget %+v", s.HintsTTL, s.RetryBudget)
				}
			},
		},
		{
			name:   "every key, and the password from secureJsonData",
			json:   dsn + `, "edge_model": {"half_life": "5m", "min_samples": 30, "confidence": 0.99, "fail_close_threshold": 0.9, "fail_open_threshold": 0.1}, "hints": {"ttl": "1m", "retry_budget": {"ratio": 0.2, "min_retries_per_second": 0}}}`,
			secure: map[string]string{"password": "s3cret"},
			check: func(t *testing.T, s Settings) {
				want := dependencyanalysis.ModelConfig{MinSamples: 30, Confidence: 0.99, FailCloseThreshold: 0.9, FailOpenThreshold: 0.1, HalfLife: 5 * time.Minute,
					MaxEdges: dependencyanalysis.DefaultMaxEdges}
				if s.Model != want {
					t.Errorf("model %+v, want %+v", s.Model, want)
				}
				if s.HintsTTL != time.Minute || s.RetryBudget != (ownership.RetryBudget{Ratio: 0.2}) || s.Password != "s3cret" {
					t.Errorf("hints ttl %v, budget %+v, password set %v", s.HintsTTL, s.RetryBudget, s.Password != "")
				}
			},
		},
		{
			name: "key/value connection string",
			json: `{"store": {"dsn": "host=db port=5432 dbname=errorownership user=grafana sslmode=disable"}}`,
		},
		{name: "no dsn", json: `{}`, errs: []string{"store.dsn is empty"}},
		{name: "empty jsonData", json: ``, errs: []string{"store.dsn is empty"}},
		{name: "not JSON", json: `{"store": `, errs: []string{"not the JSON this plugin reads"}},
		{name: "URL password", json: `{"store": {"dsn": "postgres://grafana:hunter2@db/eo"}}`, errs: []string{"store.dsn holds a password", "secureJsonData.password"}}, //nolint:gosec // G101: a made-up password, which the settings must refuse
		{name: "query password", json: `{"store": {"dsn": "postgres://grafana@db/eo?password=hunter2"}}`, errs: []string{"store.dsn holds a password"}},
		{name: "keyword password", json: `{"store": {"dsn": "host=db password=hunter2 dbname=eo"}}`, errs: []string{"store.dsn holds a password"}},
		{name: "unparseable dsn", json: `{"store": {"dsn": "postgres://db:notaport/eo"}}`, errs: []string{"store.dsn cannot be parsed"}},
		{name: "bare number half-life", json: dsn + `, "edge_model": {"half_life": "600"}}`, errs: []string{`edge_model.half_life: "600" is not a duration`, `"10m"`}},
		{name: "half-life too short", json: dsn + `, "edge_model": {"half_life": "10ms"}}`, errs: []string{"edge_model.half_life: 10ms must be 0"}},
		{name: "thresholds the wrong way round", json: dsn + `, "edge_model": {"fail_open_threshold": 0.9, "fail_close_threshold": 0.5}}`, errs: []string{"fail_open_threshold (0.9) must be below fail_close_threshold (0.5)"}},
		{name: "no samples", json: dsn + `, "edge_model": {"min_samples": 0}}`, errs: []string{"edge_model.min_samples: 0 must be at least 1"}},
		{name: "ttl too short", json: dsn + `, "hints": {"ttl": "100ms"}}`, errs: []string{"hints.ttl: 100ms must be at least 1s"}},
		{name: "budget out of range", json: dsn + `, "hints": {"retry_budget": {"ratio": 2}}}`, errs: []string{"hints.retry_budget: retry budget out of range"}},
		{
			name: "every problem at once",
			json: `{"edge_model": {"half_life": "soon", "confidence": 2}, "hints": {"ttl": "0s"}}`,
			errs: []string{"store.dsn is empty", "edge_model.half_life", "edge_model.confidence", "hints.ttl"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := LoadSettings([]byte(tc.json), tc.secure)
			if len(tc.errs) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if tc.check != nil {
					tc.check(t, s)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error; want one saying %q", tc.errs)
			}
			for _, want := range tc.errs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
}
