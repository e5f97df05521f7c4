// SPDX-License-Identifier: Apache-2.0

// Package errorownershiphintsextension serves the ownership hints
// (docs/design.md §9.3), GET /v1/hints?service=NAME, the edge model's
// modes and the retry budget that services' SDK hooks read: from the model
// merged in the PostgreSQL store when it has a store section, so that hint
// servers can run apart from the analysis collectors, or else from the
// model of the errorownership processor that names it with hints_extension.
// The endpoint is a confighttp server: TLS and the collector's
// authenticator extensions apply.
//
//go:generate make -C ../.. generate-metadata METADATA_YAML=extension/errorownershiphintsextension/metadata.yaml
package errorownershiphintsextension // import "github.com/errorownership/errorownership/extension/errorownershiphintsextension"
