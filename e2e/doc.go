// SPDX-License-Identifier: Apache-2.0

// Package e2e holds end-to-end tests that build the custom collector with
// `make otelcol` and run the real binary.
package e2e
