// SPDX-License-Identifier: Apache-2.0

// Package envoy holds the tests of the Envoy sidecar configuration in this
// directory (README.md): envoy.yaml run by a real Envoy in front of a real
// upstream. It has no Go API; the configuration is the product.
package envoy
