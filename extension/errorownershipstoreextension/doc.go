// SPDX-License-Identifier: Apache-2.0

// Package errorownershipstoreextension is the errorownership_store
// extension: the one configuration of the PostgreSQL store (docs/store.md)
// that the errorownership processor, the connector and the hints extension
// name by ID (store: errorownership_store), as exporters name a storage
// extension. It owns the connection settings and the pool, the writer's
// settings, how often the model merged in the store is read, and the
// edge_model that judges it, so that the verdicts of every analysis and the
// hints served from the store judge by the same settings.
//
//go:generate make -C ../.. generate-metadata METADATA_YAML=extension/errorownershipstoreextension/metadata.yaml
package errorownershipstoreextension // import "github.com/errorownership/errorownership/extension/errorownershipstoreextension"
