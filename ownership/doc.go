// SPDX-License-Identifier: Apache-2.0

// Package ownership is the shared vocabulary of error ownership
// (docs/design.md §3): the header, metadata and span attribute names and the
// values they carry, the edge modes, and the ownership hints' wire format
// with the retry-budget defaults. The dependency analysis, the collector
// processor, the SDK hooks, the store and the dashboards all speak it.
//
// The names and values are stated once, in conformance/vocabulary.yaml;
// ownership.go is generated from it (make generate-vocabulary), as are the
// Java, TypeScript and Python hooks' vocabularies. This package adds what
// reads and writes them.
//
// The package depends on nothing but the standard library, so that services
// can import the hooks without pulling in the collector.
package ownership
