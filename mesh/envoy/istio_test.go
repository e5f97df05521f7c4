// SPDX-License-Identifier: Apache-2.0

package envoy_test

import (
	"errors"
	"io"
	"os"
	"reflect"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/errorownership/errorownership/ownership"
)

// TestIstioMatchesEnvoy: no Istio is at hand to run istio.yaml, so every
// Envoy fragment in it is checked to be the one envoy.yaml states, which
// TestRetryPolicy, TestOwnReplies and TestBudget run; and both to mirror
// the hooks' defaults.
func TestIstioMatchesEnvoy(t *testing.T) {
	cfg := loadYAML(t, "envoy.yaml")[0]
	retried := dig(t, routes(t, cfg), 0, "route").(map[string]any)
	policy := retried["retry_policy"].(map[string]any)
	budget := dig(t, cluster(t, cfg), "circuit_breakers", "thresholds", 0, "retry_budget")
	filters := dig(t, cluster(t, cfg), "typed_extension_protocol_options",
		"envoy.extensions.upstreams.http.v3.HttpProtocolOptions", "http_filters")
	localReply := hcm(t, cfg)["local_reply_config"]

	byKind := map[string]any{}
	for _, d := range loadYAML(t, "istio.yaml") {
		byKind[d["kind"].(string)] = d
	}
	patches := dig(t, byKind["EnvoyFilter"], "spec", "configPatches").([]any)
	vs := dig(t, byKind["VirtualService"], "spec", "http").([]any)

	cases := []struct {
		name      string
		got, want any
	}{
		{"the budget's percent is the hooks' ratio", dig(t, budget, "budget_percent", "value"), 100 * ownership.DefaultRetryRatio},
		{"retries are the hooks' default attempts (3) less one", policy["num_retries"], 2},
		{"DestinationRule percent", dig(t, byKind["DestinationRule"], "spec", "trafficPolicy", "retryBudget", "percent"), dig(t, budget, "budget_percent", "value")},
		{"DestinationRule floor", dig(t, byKind["DestinationRule"], "spec", "trafficPolicy", "retryBudget", "minRetryConcurrency"), dig(t, budget, "min_retry_concurrency")},
		{"VirtualService retryOn", dig(t, vs, 0, "retries", "retryOn"), policy["retry_on"]},
		{"VirtualService attempts", dig(t, vs, 0, "retries", "attempts"), policy["num_retries"]},
		{"VirtualService methods", dig(t, vs, 0, "match", 0, "method", "regex"), dig(t, routes(t, cfg), 0, "match", "headers", 0, "string_match", "safe_regex", "regex")},
		{"VirtualService's other routes retry nothing", dig(t, vs, 1, "retries", "attempts"), 0},
		{"the marker", dig(t, patches, 0, "patch", "value", "route", "retry_policy", "retriable_headers"), policy["retriable_headers"]},
		{"the backoff", dig(t, patches, 0, "patch", "value", "route", "retry_policy", "retry_back_off"), policy["retry_back_off"]},
		{"the virtual host", dig(t, patches, 1, "patch", "value"), map[string]any{
			"include_request_attempt_count": true,
			"response_headers_to_remove":    dig(t, hcm(t, cfg), "route_config", "virtual_hosts", 0, "response_headers_to_remove"),
		}},
		{"the upstream filters", dig(t, patches, 2, "patch", "value", "typed_extension_protocol_options",
			"envoy.extensions.upstreams.http.v3.HttpProtocolOptions", "http_filters"), filters},
		{"own replies, outbound", dig(t, patches, 3, "patch", "value", "typed_config", "local_reply_config"), localReply},
		{"own replies, inbound", dig(t, patches, 4, "patch", "value", "typed_config", "local_reply_config"), localReply},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !reflect.DeepEqual(normalize(c.got), normalize(c.want)) {
				t.Errorf("istio.yaml has\n%v\nenvoy.yaml (or the hooks) has\n%v", c.got, c.want)
			}
		})
	}
}

// normalize makes YAML's ints and floats comparable.
func normalize(v any) any {
	switch x := v.(type) {
	case int:
		return float64(x)
	case map[string]any:
		m := map[string]any{}
		for k, e := range x {
			m[k] = normalize(e)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = normalize(e)
		}
		return l
	}
	return v
}

// loadYAML reads the documents of a YAML file, leaving out empty ones.
func loadYAML(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path) //nolint:gosec // G304: a file of this directory
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	var docs []map[string]any
	for {
		var d map[string]any
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if d != nil {
			docs = append(docs, d)
		}
	}
}
