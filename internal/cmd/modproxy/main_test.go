// SPDX-License-Identifier: Apache-2.0

package main

import (
	"archive/zip"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// repo writes files into a new git repository and returns its root.
func repo(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, data := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(data), 0o644))
	}
	cmd := exec.Command("git", "init", "-q")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	return root
}

// threeModules is a root module between a leaf and a command that
// requires it; the root module holds the other two's directories.
func threeModules(version string) map[string]string {
	return map[string]string{
		"go.work":          "go 1.24\n\nuse (\n\t.\n\t./leaf\n\t./cmd/tool\n)\n",
		"LICENSE":          "the licence\n",
		"go.mod":           "module example.com/r\n\ngo 1.24\n\nrequire example.com/r/leaf " + version + "\n",
		"go.sum":           "golang.org/x/text v0.1.0/go.mod h1:abc=\nexample.com/r/leaf v0.0.9 h1:stale=\n",
		"r.go":             "package r\n",
		".gitignore":       "/ignored.go\n",
		"ignored.go":       "package r\n",
		"leaf/go.mod":      "module example.com/r/leaf\n\ngo 1.24\n",
		"leaf/l.go":        "package leaf\n",
		"cmd/tool/go.mod":  "module example.com/r/cmd/tool\n\ngo 1.24\n\nrequire example.com/r " + version + "\n",
		"cmd/tool/main.go": "package main\n",
	}
}

func TestProxyLayoutAndGoSum(t *testing.T) {
	root := repo(t, threeModules("v0.1.0"))
	out := t.TempDir()
	require.NoError(t, run(io.Discard, root, out, "v0.1.0", false))

	for _, m := range []string{"example.com/r", "example.com/r/leaf", "example.com/r/cmd/tool"} {
		for _, f := range []string{"list", "v0.1.0.info", "v0.1.0.mod", "v0.1.0.zip"} {
			assert.FileExists(t, filepath.Join(out, filepath.FromSlash(m), "@v", f))
		}
	}
	names, sum := zipContents(t, filepath.Join(out, "example.com/r/@v/v0.1.0.zip"), "example.com/r@v0.1.0/")
	assert.ElementsMatch(t, []string{".gitignore", "LICENSE", "go.mod", "go.sum", "go.work", "r.go"}, names,
		"the root module's zip: no nested module's files, nothing git ignores")
	assert.NotContains(t, sum, "h1:stale=", "a committed line of ours is replaced")
	assert.Contains(t, sum, "golang.org/x/text v0.1.0/go.mod h1:abc=\n", "the other lines stay")
	assert.Regexp(t, `^example\.com/r/leaf v0\.1\.0 h1:\S+=\nexample\.com/r/leaf v0\.1\.0/go\.mod h1:\S+=\ngolang\.org`, sum,
		"the leaf's hashes, in the go command's order")

	names, sum = zipContents(t, filepath.Join(out, "example.com/r/cmd/tool/@v/v0.1.0.zip"), "example.com/r/cmd/tool@v0.1.0/")
	assert.Contains(t, names, "LICENSE", "a module without a LICENSE gets the repository's")
	for _, line := range []string{"example.com/r v0.1.0 h1:", "example.com/r v0.1.0/go.mod h1:", "example.com/r/leaf v0.1.0 h1:", "example.com/r/leaf v0.1.0/go.mod h1:"} {
		assert.Contains(t, sum, line, "the command requires the root module directly and the leaf through it")
	}
}

func TestGoSumWrittenForTheReleaseCommit(t *testing.T) {
	root := repo(t, threeModules("v0.1.0"))
	require.NoError(t, run(io.Discard, root, "", "v0.1.0", true))
	b, err := os.ReadFile(filepath.Join(root, "cmd/tool/go.sum")) //nolint:gosec // G304: a file of the test's own repository
	require.NoError(t, err)
	assert.Equal(t, 4, strings.Count(string(b), "example.com/r"), "%s", b)
	assert.NoFileExists(t, filepath.Join(root, "leaf/go.sum"), "the leaf requires none of ours")
}

func TestRefused(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(map[string]string)
		wants string
	}{
		{"a replace directive", func(f map[string]string) {
			f["go.mod"] += "replace example.com/r/leaf => ./leaf\n"
		}, "replace directives"},
		{"a sibling at another version", func(f map[string]string) {
			f["cmd/tool/go.mod"] = strings.Replace(f["cmd/tool/go.mod"], "v0.1.0", "v0.0.9", 1)
		}, "cmd/tool/go.mod requires example.com/r v0.0.9"},
		{"a cycle", func(f map[string]string) {
			f["leaf/go.mod"] += "\nrequire example.com/r v0.1.0\n"
		}, "cycle"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := threeModules("v0.1.0")
			tt.edit(files)
			err := run(io.Discard, repo(t, files), t.TempDir(), "v0.1.0", false)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wants)
		})
	}
}

// zipContents returns the names in a module zip, without prefix, and its
// go.sum.
func zipContents(t *testing.T, path, prefix string) ([]string, string) {
	t.Helper()
	r, err := zip.OpenReader(path)
	require.NoError(t, err)
	defer r.Close()
	var names []string
	sum := ""
	for _, f := range r.File {
		require.True(t, strings.HasPrefix(f.Name, prefix), f.Name)
		name := strings.TrimPrefix(f.Name, prefix)
		names = append(names, name)
		if name == "go.sum" {
			rc, err := f.Open()
			require.NoError(t, err)
			b, err := io.ReadAll(rc)
			require.NoError(t, err)
			rc.Close()
			sum = string(b)
		}
	}
	return names, sum
}
