// SPDX-License-Identifier: Apache-2.0

package hooks

import "github.com/errorownership/errorownership/ownership"

// The names below moved to package ownership, the wire vocabulary shared
// with the collector, in v0.1.0. They remain here, as aliases, until v0.3.0.

// Mode is what the dependency analysis learned about an edge.
//
// Deprecated: use ownership.Mode.
type Mode = ownership.Mode

// The modes.
const (
	// Deprecated: use ownership.ModeUnknown.
	ModeUnknown = ownership.ModeUnknown
	// Deprecated: use ownership.ModeFailClose.
	ModeFailClose = ownership.ModeFailClose
	// Deprecated: use ownership.ModeFailOpen.
	ModeFailOpen = ownership.ModeFailOpen
)

// ParseMode reads a Mode's spelling; anything else is ModeUnknown.
//
// Deprecated: use ownership.ParseMode.
func ParseMode(s string) Mode { return ownership.ParseMode(s) }

// Budget defaults.
const (
	// Deprecated: use ownership.DefaultRetryRatio.
	DefaultRatio = ownership.DefaultRetryRatio
	// Deprecated: use ownership.DefaultMinRetriesPerSecond.
	DefaultMinRetriesPerSecond = ownership.DefaultMinRetriesPerSecond
)
