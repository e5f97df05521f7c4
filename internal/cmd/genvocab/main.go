// SPDX-License-Identifier: Apache-2.0

// Command genvocab writes the error-ownership vocabulary
// (conformance/vocabulary.yaml) into the Go, Java, TypeScript and Python
// sources that speak it, so that a name is stated once. `make
// generate-vocabulary` runs it; with -check it writes nothing and fails when
// a generated file differs from what it would write.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
)

func main() {
	root := flag.String("root", ".", "the repository's root")
	check := flag.Bool("check", false, "write nothing; fail if a generated file is not what the registry gives")
	flag.Parse()
	if err := run(*root, *check); err != nil {
		fmt.Fprintln(os.Stderr, "genvocab:", err)
		os.Exit(1)
	}
}

func run(root string, check bool) error {
	b, err := os.ReadFile(filepath.Join(root, source)) //nolint:gosec // G304: the registry, under the root the caller names
	if err != nil {
		return err
	}
	r, err := parse(b)
	if err != nil {
		return fmt.Errorf("%s: %w", source, err)
	}
	files, err := generate(r)
	if err != nil {
		return err
	}
	var stale []string
	for _, path := range slices.Sorted(maps.Keys(files)) {
		full := filepath.Join(root, path)
		if check {
			have, err := os.ReadFile(full) //nolint:gosec // G304: a file this generator writes
			if err != nil || !bytes.Equal(have, files[path]) {
				stale = append(stale, path)
			}
			continue
		}
		if err := os.WriteFile(full, files[path], 0o644); err != nil {
			return err
		}
	}
	if len(stale) > 0 {
		return fmt.Errorf("not what %s gives (run make generate-vocabulary): %v", source, stale)
	}
	return nil
}
