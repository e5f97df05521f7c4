// SPDX-License-Identifier: Apache-2.0

package errorownershiphintsextension // import "github.com/errorownership/errorownership/extension/errorownershiphintsextension"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"

	"github.com/errorownership/errorownership/extension/errorownershiphintsextension/internal/metadata"
)

// NewFactory returns a factory for the errorownership_hints extension.
func NewFactory() extension.Factory {
	return extension.NewFactory(metadata.Type, createDefaultConfig, createExtension, metadata.ExtensionStability)
}

func createExtension(_ context.Context, set extension.Settings, cfg component.Config) (extension.Extension, error) {
	return newHintsExtension(set, cfg.(*Config)), nil
}
