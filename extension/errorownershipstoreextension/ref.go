// SPDX-License-Identifier: Apache-2.0

package errorownershipstoreextension // import "github.com/errorownership/errorownership/extension/errorownershipstoreextension"

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/extension"

	"github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/internal/edges"
	"github.com/errorownership/errorownership/store"
)

// Store is the errorownership_store extension as the components that name
// it see it, once the collector has started it.
type Store interface {
	extension.Extension
	// Store returns the store: the pool every component that names the
	// extension shares, and the writer's settings (store.NewWriter).
	Store() *store.Store
	// EdgeModel returns how the counts merged in the store are judged.
	EdgeModel() dependencyanalysis.ModelConfig
	// Model returns a reader of the model merged in the store, judged by
	// EdgeModel and read every model_refresh once started; names map it
	// onto an analysis' symbols, or nil reads it for its views alone.
	Model(names *dependencyanalysis.Symbols, inUse edges.RLocker) *edges.Store
}

// Ref is a component's store key: the ID of the errorownership_store
// extension it writes to or reads from. It reads from a component ID
// ("errorownership_store", "errorownership_store/east"); a section of the
// store's own keys, the form before the extension, is read too, so that
// Validate can say where those keys went rather than the collector failing
// to decode it.
type Ref struct {
	id component.ID
	// section lists the keys of a store section given in the old form.
	section []string
}

// NewRef returns a reference to the extension id.
func NewRef(id component.ID) *Ref { return &Ref{id: id} }

// ID returns the extension's ID.
func (r *Ref) ID() component.ID { return r.id }

// String returns the extension's ID.
func (r *Ref) String() string { return r.id.String() }

// MarshalText writes the ID, so that the collector prints the configuration
// as it was given.
func (r Ref) MarshalText() ([]byte, error) { return r.id.MarshalText() }

// UnmarshalText reads the ID.
func (r *Ref) UnmarshalText(text []byte) error {
	if strings.TrimSpace(string(text)) == "" {
		return errors.New("empty; name the errorownership_store extension, such as errorownership_store")
	}
	return r.id.UnmarshalText(text)
}

var _ confmap.Unmarshaler = (*Ref)(nil)

// Unmarshal reads a store section of the old form, whose keys Validate
// refuses.
func (r *Ref) Unmarshal(conf *confmap.Conf) error {
	r.section = nil
	for _, k := range conf.AllKeys() {
		top, _, _ := strings.Cut(k, confmap.KeyDelimiter)
		if !slices.Contains(r.section, top) {
			r.section = append(r.section, top)
		}
	}
	slices.Sort(r.section)
	if r.section == nil {
		r.section = []string{}
	}
	return nil
}

// Validate refuses a store section of the old form, naming the move.
func (r *Ref) Validate() error {
	if r.section == nil {
		return nil
	}
	keys := "its keys"
	if len(r.section) > 0 {
		keys = strings.Join(r.section, ", ")
	}
	return fmt.Errorf("the store is configured once, in an errorownership_store extension, and named here by its ID: move %s under extensions: errorownership_store:, list errorownership_store in service.extensions, and write store: errorownership_store here (docs/store.md)", keys)
}

// Lookup returns the errorownership_store extension r names among host's
// extensions, which the collector has started before any pipeline or
// dependent extension.
func (r *Ref) Lookup(host component.Host) (Store, error) {
	ext, ok := host.GetExtensions()[r.id]
	if !ok {
		return nil, fmt.Errorf("store: no extension %s in this collector; configure it under extensions and list it in service.extensions", r.id)
	}
	st, ok := ext.(Store)
	if !ok {
		return nil, fmt.Errorf("store: %s is not an errorownership_store extension", r.id)
	}
	if st.Store() == nil {
		return nil, fmt.Errorf("store: %s has not been started", r.id)
	}
	return st, nil
}
