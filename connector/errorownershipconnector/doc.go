// SPDX-License-Identifier: Apache-2.0

// Package errorownershipconnector is an OpenTelemetry Collector connector,
// traces to metrics, that turns the error-ownership analysis into metrics
// for Prometheus and its kin: failed requests by verdict and claim sent,
// calls, failures, retries and suppressed retries by edge, the requests
// served per root request by depth, the retry-storm radius and claim
// accuracy, with exemplars linking propagated and coincidental failures to
// their traces. It runs the analysis itself, or takes the figures of an
// errorownership processor in the same collector so that the spans are
// analysed once. See README.md.
//
//go:generate make -C ../.. generate-metadata METADATA_YAML=connector/errorownershipconnector/metadata.yaml
package errorownershipconnector // import "github.com/errorownership/errorownership/connector/errorownershipconnector"
