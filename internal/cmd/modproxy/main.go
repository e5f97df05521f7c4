// SPDX-License-Identifier: Apache-2.0

// Command modproxy serves this repository's Go modules, as they are in the
// work tree, from a file-system module proxy at a release version: with
// GOPROXY=file://DIR, GOWORK=off and GONOSUMDB for our module path,
// `go install …/cmd/errorownership@VERSION` and an outside application's
// `go get …/hooks@VERSION` resolve our modules as they will once VERSION
// is tagged, before it is (docs/modules.md).
//
//	go run ./internal/cmd/modproxy -out DIR [-version v0.1.0]
//	go run ./internal/cmd/modproxy -gosum [-version v0.1.0]
//
// The modules are the ones go.work uses. Each is written in the layout
// `go mod download` reads (DIR/<escaped module path>/@v/{list,VERSION.info,
// VERSION.mod,VERSION.zip}); its zip is made by golang.org/x/mod/zip from
// the files git would commit (tracked or untracked but not ignored), so
// nested modules are left out as the go command leaves them out.
//
// The modules require each other at VERSION, and `go install pkg@version`
// checks every module it builds against the go.sum of the one it installs:
// each module's go.sum must hold its siblings' hashes. The committed go.sum
// files leave them out (they would change with every commit); modproxy
// writes the modules in dependency order and completes each one's go.sum,
// in its zip, with the hashes of the siblings it requires, directly or not.
// With -gosum it writes those completed go.sum files into the work tree
// instead: the release commit `make release-tags` tags.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/sumdb/dirhash"
	modzip "golang.org/x/mod/zip"
)

func main() {
	out := flag.String("out", "", "the proxy's directory, for GOPROXY=file://DIR")
	version := flag.String("version", "v0.1.0", "the version the modules are served at, which they require each other at")
	root := flag.String("root", ".", "the repository's root, where go.work is")
	gosum := flag.Bool("gosum", false, "write each module's go.sum completed with its siblings' hashes into the work tree, instead of a proxy")
	flag.Parse()
	if (*out == "") == !*gosum {
		fmt.Fprintln(os.Stderr, "modproxy: give -out DIR or -gosum")
		flag.Usage()
		os.Exit(2)
	}
	if err := run(os.Stdout, *root, *out, *version, *gosum); err != nil {
		fmt.Fprintln(os.Stderr, "modproxy:", err)
		os.Exit(1)
	}
}

// mod is one of the repository's modules.
type mod struct {
	dir   string // in the repository
	path  string
	gomod []byte
	file  *modfile.File
	// requires are the siblings its go.mod requires.
	requires []string
	// zipHash and modHash are its go.sum hashes once written.
	zipHash, modHash string
}

// run writes the proxy into out, or the go.sum files when writeGoSum, and
// says on w what it wrote.
func run(w io.Writer, root, out, version string, writeGoSum bool) error {
	if module.CanonicalVersion(version) != version {
		return fmt.Errorf("version %q is not a canonical semantic version", version)
	}
	mods, err := readModules(root, version)
	if err != nil {
		return err
	}
	order, err := dependencyOrder(mods)
	if err != nil {
		return err
	}
	tm := commitTime(root)
	tmp, err := os.MkdirTemp("", "modproxy-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	for _, m := range order {
		sum, err := completedGoSum(root, m, mods, version)
		if err != nil {
			return err
		}
		zipPath := filepath.Join(tmp, strings.ReplaceAll(m.path, "/", "_")+".zip")
		if err := writeZip(root, m, version, sum, zipPath); err != nil {
			return err
		}
		if m.zipHash, err = dirhash.HashZip(zipPath, dirhash.Hash1); err != nil {
			return fmt.Errorf("%s: %w", m.path, err)
		}
		if m.modHash, err = goModHash(m.gomod); err != nil {
			return fmt.Errorf("%s: %w", m.path, err)
		}
		if writeGoSum {
			if sum == nil {
				continue
			}
			if err := os.WriteFile(filepath.Join(root, m.dir, "go.sum"), sum, 0o644); err != nil {
				return err
			}
			fmt.Fprintf(w, "%s/go.sum: %s's siblings' hashes added\n", m.dir, m.path)
			continue
		}
		if err := publish(out, m, version, tm, zipPath); err != nil {
			return err
		}
		fmt.Fprintf(w, "%s %s\n", m.path, version)
	}
	return nil
}

// readModules reads go.work's modules and checks that they require each
// other at version.
func readModules(root, version string) (map[string]*mod, error) {
	data, err := os.ReadFile(filepath.Join(root, "go.work")) //nolint:gosec // G304: the repository's own go.work
	if err != nil {
		return nil, err
	}
	work, err := modfile.ParseWork("go.work", data, nil)
	if err != nil {
		return nil, err
	}
	mods := map[string]*mod{}
	for _, u := range work.Use {
		dir := path.Clean(u.Path)
		gomod, err := os.ReadFile(filepath.Join(root, dir, "go.mod")) //nolint:gosec // G304: a go.mod of a module go.work uses
		if err != nil {
			return nil, err
		}
		f, err := modfile.Parse(dir+"/go.mod", gomod, nil)
		if err != nil {
			return nil, err
		}
		if len(f.Replace) > 0 {
			return nil, fmt.Errorf("%s/go.mod has replace directives: go install pkg@version refuses a module with one; go.work joins the modules for development", dir)
		}
		mods[f.Module.Mod.Path] = &mod{dir: dir, path: f.Module.Mod.Path, gomod: gomod, file: f}
	}
	var wrong []string
	for _, m := range mods {
		for _, r := range m.file.Require {
			if mods[r.Mod.Path] == nil {
				continue
			}
			if r.Mod.Version != version {
				wrong = append(wrong, fmt.Sprintf("%s/go.mod requires %s %s", m.dir, r.Mod.Path, r.Mod.Version))
			}
			m.requires = append(m.requires, r.Mod.Path)
		}
	}
	if len(wrong) > 0 {
		slices.Sort(wrong)
		return nil, fmt.Errorf("the modules must require each other at %s:\n  %s", version, strings.Join(wrong, "\n  "))
	}
	return mods, nil
}

// dependencyOrder puts every module after the siblings it requires.
func dependencyOrder(mods map[string]*mod) ([]*mod, error) {
	var order []*mod
	state := map[string]int{} // 1: being visited, 2: done
	var visit func(p string, chain []string) error
	visit = func(p string, chain []string) error {
		switch state[p] {
		case 1:
			return fmt.Errorf("the modules require each other in a cycle: %s", strings.Join(append(chain, p), " -> "))
		case 2:
			return nil
		}
		state[p] = 1
		for _, r := range mods[p].requires {
			if err := visit(r, append(chain, p)); err != nil {
				return err
			}
		}
		state[p] = 2
		order = append(order, mods[p])
		return nil
	}
	paths := make([]string, 0, len(mods))
	for p := range mods {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		if err := visit(p, nil); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// completedGoSum returns m's go.sum with the hashes of every sibling it
// requires, directly or not (those were written before m), in place of any
// of our modules' lines it had; nil when m requires no sibling.
func completedGoSum(root string, m *mod, mods map[string]*mod, version string) ([]byte, error) {
	deps := map[string]bool{}
	var walk func(p string)
	walk = func(p string) {
		for _, r := range mods[p].requires {
			if !deps[r] {
				deps[r] = true
				walk(r)
			}
		}
	}
	walk(m.path)
	old, err := os.ReadFile(filepath.Join(root, m.dir, "go.sum")) //nolint:gosec // G304: the go.sum of a module go.work uses
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if len(deps) == 0 {
		return nil, nil
	}
	// A go.sum line: module path, version (with /go.mod for the go.mod's
	// hash), hash.
	sums := map[module.Version]string{}
	for _, l := range strings.Split(string(old), "\n") {
		if f := strings.Fields(l); len(f) == 3 && mods[f[0]] == nil {
			sums[module.Version{Path: f[0], Version: f[1]}] = f[2]
		}
	}
	for d := range deps {
		sums[module.Version{Path: d, Version: version}] = mods[d].zipHash
		sums[module.Version{Path: d, Version: version + "/go.mod"}] = mods[d].modHash
	}
	// In the go command's order: by module path, then semantic version,
	// the /go.mod line after the module's.
	keys := slices.Collect(maps.Keys(sums))
	module.Sort(keys)
	lines := make([]string, 0, len(keys))
	for _, k := range keys {
		lines = append(lines, k.Path+" "+k.Version+" "+sums[k])
	}
	return []byte(strings.Join(lines, "\n") + "\n"), nil
}

// writeZip writes m's module zip to zipPath, with sum as its go.sum when
// not nil.
func writeZip(root string, m *mod, version string, sum []byte, zipPath string) error {
	files, err := moduleFiles(root, m.dir)
	if err != nil {
		return fmt.Errorf("%s: %w", m.path, err)
	}
	if sum != nil {
		files = slices.DeleteFunc(files, func(f modzip.File) bool { return f.Path() == "go.sum" })
		files = append(files, dataFile{name: "go.sum", data: sum})
	}
	w, err := os.Create(zipPath) //nolint:gosec // G304: a file in this program's own temporary directory
	if err != nil {
		return err
	}
	err = modzip.Create(w, module.Version{Path: m.path, Version: version}, files)
	return errors.Join(err, w.Close())
}

// moduleFiles lists the files of the module in dir as git would commit
// them: tracked, or untracked and not ignored, and present. The nested
// modules' go.mod files are among them, so that modzip.Create leaves those
// modules out. A module without a LICENSE gets the repository's, as the go
// command gives it to a module in a subdirectory.
func moduleFiles(root, dir string) ([]modzip.File, error) {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", ".")
	cmd.Dir = filepath.Join(root, dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files in %s: %w: %s", dir, err, stderr.String())
	}
	var files []modzip.File
	haveLicense := false
	for _, name := range strings.Split(string(out), "\x00") {
		if name == "" {
			continue
		}
		p := filepath.Join(root, dir, filepath.FromSlash(name))
		info, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the work tree, not yet in the index
		}
		if err != nil {
			return nil, err
		}
		files = append(files, diskFile{name: name, path: p, info: info})
		haveLicense = haveLicense || name == "LICENSE"
	}
	if !haveLicense && dir != "." {
		if data, err := os.ReadFile(filepath.Join(root, "LICENSE")); err == nil { //nolint:gosec // G304: the repository's LICENSE
			files = append(files, dataFile{name: "LICENSE", data: data})
		}
	}
	return files, nil
}

// goModHash is the go.sum hash of a go.mod file: the "/go.mod" line's.
func goModHash(gomod []byte) (string, error) {
	return dirhash.Hash1([]string{"go.mod"}, func(string) (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(gomod)), nil
	})
}

// publish writes m at version into the proxy directory out.
func publish(out string, m *mod, version string, tm time.Time, zipPath string) error {
	esc, err := module.EscapePath(m.path)
	if err != nil {
		return err
	}
	escVersion, err := module.EscapeVersion(version)
	if err != nil {
		return err
	}
	dir := filepath.Join(out, filepath.FromSlash(esc), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, tm})
	if err != nil {
		return err
	}
	zipData, err := os.ReadFile(zipPath) //nolint:gosec // G304: the zip this program wrote
	if err != nil {
		return err
	}
	list, err := listWith(filepath.Join(dir, "list"), version)
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{
		escVersion + ".info": info,
		escVersion + ".mod":  m.gomod,
		escVersion + ".zip":  zipData,
		"list":               list,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// listWith returns the proxy's list of versions in path with version
// added.
func listWith(path, version string) ([]byte, error) {
	data, err := os.ReadFile(path) //nolint:gosec // G304: the proxy's own list
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	versions := strings.Fields(string(data))
	if !slices.Contains(versions, version) {
		versions = append(versions, version)
	}
	return []byte(strings.Join(versions, "\n") + "\n"), nil
}

// commitTime is HEAD's commit time, which the .info files give as the
// version's: the time the go command shows for it.
func commitTime(root string) time.Time {
	cmd := exec.Command("git", "log", "-1", "--format=%cI")
	cmd.Dir = root
	out, err := cmd.Output()
	if err == nil {
		if t, err := time.Parse(time.RFC3339, strings.TrimSpace(string(out))); err == nil {
			return t.UTC()
		}
	}
	return time.Now().UTC().Truncate(time.Second)
}

// diskFile is a file of the work tree.
type diskFile struct {
	name, path string
	info       fs.FileInfo
}

func (f diskFile) Path() string                 { return f.name }
func (f diskFile) Lstat() (fs.FileInfo, error)  { return f.info, nil }
func (f diskFile) Open() (io.ReadCloser, error) { return os.Open(f.path) }

// dataFile is a file made here: a completed go.sum, the root's LICENSE.
type dataFile struct {
	name string
	data []byte
}

func (f dataFile) Path() string                 { return f.name }
func (f dataFile) Lstat() (fs.FileInfo, error)  { return dataFileInfo(f), nil }
func (f dataFile) Open() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(f.data)), nil }

type dataFileInfo dataFile

func (fi dataFileInfo) Name() string       { return path.Base(fi.name) }
func (fi dataFileInfo) Size() int64        { return int64(len(fi.data)) }
func (fi dataFileInfo) Mode() fs.FileMode  { return 0o644 }
func (fi dataFileInfo) ModTime() time.Time { return time.Time{} }
func (fi dataFileInfo) IsDir() bool        { return false }
func (fi dataFileInfo) Sys() any           { return nil }
