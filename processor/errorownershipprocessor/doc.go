// SPDX-License-Identifier: Apache-2.0

// Package errorownershipprocessor is an OpenTelemetry Collector processor
// that passes traces on unchanged and, on the side, runs the error-ownership
// dependency analysis: it buffers compact span records by trace, learns per
// edge whether a dependency's failure fails the request, gives every failed
// inbound request a verdict (own, propagated or coincidental) and measures
// claim accuracy and retry amplification. See README.md.
//
//go:generate make -C ../.. generate-metadata METADATA_YAML=processor/errorownershipprocessor/metadata.yaml
package errorownershipprocessor // import "github.com/errorownership/errorownership/processor/errorownershipprocessor"
