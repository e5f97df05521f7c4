// SPDX-License-Identifier: Apache-2.0

package dashboards

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

const rulesTestFile = "errorownership.rules.test.yaml"

func TestCommittedRulesAreGenerated(t *testing.T) {
	gen, err := Rules(DefaultRulesConfig())
	require.NoError(t, err)
	committed, err := os.ReadFile(filepath.Join("rules", RulesFile))
	require.NoError(t, err, "run make dashboards")
	assert.True(t, bytes.Equal(gen, committed), "dashboards/rules/%s differs from what the generator writes: run make dashboards and commit the result", RulesFile)
}

// TestPrometheusRules checks the committed rules with promtool and runs
// their unit tests: series in, alerts out.
func TestPrometheusRules(t *testing.T) {
	promtool := promtoolBinary(t)
	for _, args := range [][]string{
		{"check", "rules", RulesFile},
		{"test", "rules", rulesTestFile},
	} {
		cmd := exec.Command(promtool, args...) //nolint:gosec // G204: Debian's promtool on the repository's files
		cmd.Dir = "rules"
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "promtool %s:\n%s", strings.Join(args, " "), out)
		t.Logf("promtool %s: %s", strings.Join(args, " "), strings.Join(strings.Fields(string(out)), " "))
	}
}

// TestEveryAlertFiresAndStaysSilent: the unit tests hold every alert to a
// case where it fires and one where it must not.
func TestEveryAlertFiresAndStaysSilent(t *testing.T) {
	var tests struct {
		Tests []struct {
			Name  string `yaml:"name"`
			Cases []struct {
				Alert string `yaml:"alertname"`
				Exp   []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	b, err := os.ReadFile(filepath.Join("rules", rulesTestFile))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, &tests))
	firing, silent := map[string]bool{}, map[string]bool{}
	for _, g := range tests.Tests {
		for _, c := range g.Cases {
			if len(c.Exp) > 0 {
				firing[c.Alert] = true
			} else {
				silent[c.Alert] = true
			}
		}
	}
	for _, a := range ruleAlerts(t) {
		assert.True(t, firing[a.Alert], "%s: no case in %s where it fires", a.Alert, rulesTestFile)
		assert.True(t, silent[a.Alert], "%s: no case in %s where it stays silent", a.Alert, rulesTestFile)
	}
}

// TestEveryAlertHasARunbook: each runbook_url names a section of
// docs/runbooks.md, by GitHub's anchor for its heading.
func TestEveryAlertHasARunbook(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "runbooks.md"))
	require.NoError(t, err)
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#{2,3} (.+)$`).FindAllSubmatch(doc, -1) {
		anchors[githubAnchor(string(m[1]))] = true
	}
	for _, a := range ruleAlerts(t) {
		url := a.Annotations["runbook_url"]
		anchor, ok := strings.CutPrefix(url, RunbookURL+"#")
		if assert.True(t, ok, "%s: runbook_url %q is not a section of docs/runbooks.md", a.Alert, url) {
			assert.True(t, anchors[anchor], "%s: docs/runbooks.md has no section #%s", a.Alert, anchor)
		}
		for _, k := range []string{"summary", "description"} {
			assert.NotEmpty(t, a.Annotations[k], "%s: %s", a.Alert, k)
		}
		assert.Contains(t, []string{"critical", "warning"}, a.Labels["severity"], a.Alert)
	}
}

// ruleAlerts returns the committed file's alerting rules.
func ruleAlerts(t *testing.T) []rule {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("rules", RulesFile))
	require.NoError(t, err)
	var f ruleFile
	require.NoError(t, yaml.Unmarshal(b, &f))
	var out []rule
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				out = append(out, r)
			}
		}
	}
	require.NotEmpty(t, out)
	return out
}

// githubAnchor is the fragment GitHub gives a Markdown heading.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || ('a' <= r && r <= 'z') || ('0' <= r && r <= '9'):
			b.WriteRune(r)
		}
	}
	return b.String()
}
