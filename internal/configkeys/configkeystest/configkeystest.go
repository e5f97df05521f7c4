// SPDX-License-Identifier: Apache-2.0

// Package configkeystest checks a component's config.schema.yaml against
// its configuration type, so that the schema names every key and no other.
package configkeystest

import (
	"os"
	"reflect"
	"slices"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/errorownership/errorownership/internal/configkeys"
)

// CheckSchema fails t unless the schema at path describes exactly the keys
// of cfg (configkeys.Keys): less the keys of the settings in described
// (squashed settings that the schema names by reference to their own
// schema, such as confighttp's), and less ignore.
func CheckSchema(t *testing.T, path string, cfg any, described []any, ignore ...string) {
	t.Helper()
	raw, err := os.ReadFile(path) //nolint:gosec // G304: the component's own schema, named by its test
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := yaml.Unmarshal(raw, &schema); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defs, _ := schema["$defs"].(map[string]any)
	var inSchema []string
	var walk func(prefix string, node map[string]any)
	walk = func(prefix string, node map[string]any) {
		props, _ := node["properties"].(map[string]any)
		for k, v := range props {
			node := v.(map[string]any)
			if ref, ok := node["$ref"].(string); ok {
				walk(prefix+k+".", defs[ref].(map[string]any))
				continue
			}
			if _, ok := node["properties"]; ok {
				walk(prefix+k+".", node)
				continue
			}
			inSchema = append(inSchema, prefix+k)
		}
	}
	walk("", schema)

	keys, _ := configkeys.Keys(reflect.TypeOf(cfg))
	var skip []string
	for _, d := range described {
		k, _ := configkeys.Keys(reflect.TypeOf(d))
		skip = append(skip, k...)
	}
	skip = append(skip, ignore...)
	var inConfig []string
	for _, k := range keys {
		if !slices.Contains(skip, k) {
			inConfig = append(inConfig, k)
		}
	}
	slices.Sort(inSchema)
	slices.Sort(inConfig)
	if !slices.Equal(inSchema, inConfig) {
		t.Errorf("%s does not describe the configuration's keys:\n  in the schema: %v\n  in the config: %v", path, inSchema, inConfig)
	}
}
