// SPDX-License-Identifier: Apache-2.0

// Command genvocab writes the error-ownership vocabulary
// (conformance/vocabulary.yaml) into the Go, Java, TypeScript and Python
// sources that speak it, so that a name is stated once. `make
// generate-vocabulary` runs it; `make lint` runs it again and fails when
// that changes the tree (.ci/check-generated).
package main

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
)

func main() {
	root := flag.String("root", ".", "the repository's root")
	flag.Parse()
	if err := run(*root); err != nil {
		fmt.Fprintln(os.Stderr, "genvocab:", err)
		os.Exit(1)
	}
}

func run(root string) error {
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
	for _, path := range slices.Sorted(maps.Keys(files)) {
		if err := os.WriteFile(filepath.Join(root, path), files[path], 0o644); err != nil {
			return err
		}
	}
	return nil
}
