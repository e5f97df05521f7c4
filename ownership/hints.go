// SPDX-License-Identifier: Apache-2.0

package ownership

import (
	"errors"
	"fmt"
	"time"
)

// Hints is the document a collector serves for one service at HintsPath
// (its JSON field names are those of conformance/vocabulary.yaml, which a
// test holds the tags to):
//
//	{"version":1,"service":"checkout","generated_at":"2026-11-29T16:00:00Z","ttl_seconds":30,
//	 "retry_budget":{"ratio":0.1,"min_retries_per_second":10},
//	 "edges":[{"operation":"POST /checkout","peer_service":"recommendations",
//	           "peer_operation":"GET /recommendations","peer_addresses":["10.0.0.7:8080"],
//	           "mode":"fail_open","confidence":0.95,"samples":175}]}
type Hints struct {
	// Version is the format version, HintsVersion.
	Version int `json:"version"`
	// Service is the service.name the hints are for.
	Service string `json:"service"`
	// GeneratedAt is when the collector read the model the hints come from.
	GeneratedAt time.Time `json:"generated_at"`
	// TTLSeconds is how long the hints stay fresh; a client polls again
	// after it (a Cache-Control max-age on the response takes precedence).
	TTLSeconds int `json:"ttl_seconds"`
	// RetryBudget is the service's retry budget; absent means the defaults.
	RetryBudget *RetryBudget `json:"retry_budget,omitempty"`
	// Edges are the service's learned edges. Edges not listed are unknown,
	// which the hooks treat as fail-close.
	Edges []HintEdge `json:"edges"`
}

// NewHints assembles the document a collector answers service with: the
// service's edges of a model read at, to be used for ttl, with budget.
// Every server and reader of hints builds it here, so that they agree to
// the byte.
func NewHints(service string, edges []HintEdge, ttl time.Duration, budget RetryBudget, at time.Time) Hints {
	if edges == nil {
		edges = []HintEdge{}
	}
	var generated time.Time
	if !at.IsZero() {
		generated = at.UTC()
	}
	return Hints{
		Version:     HintsVersion,
		Service:     service,
		GeneratedAt: generated,
		TTLSeconds:  int(ttl / time.Second),
		RetryBudget: &budget,
		Edges:       edges,
	}
}

// RetryBudget is a retry budget's limits.
//
// The mapstructure tags let a collector's configuration carry one as it is
// (the errorownership processor's hints.retry_budget).
type RetryBudget struct {
	// Ratio is retries allowed per request, in [0, 1]: 0.1 allows one
	// retry per ten requests.
	Ratio float64 `json:"ratio" mapstructure:"ratio"`
	// MinRetriesPerSecond is the floor of retries always allowed, on top
	// of what requests earn.
	MinRetriesPerSecond float64 `json:"min_retries_per_second" mapstructure:"min_retries_per_second"`
}

// DefaultRetryBudget returns DefaultRetryRatio and DefaultMinRetriesPerSecond.
func DefaultRetryBudget() RetryBudget {
	return RetryBudget{Ratio: DefaultRetryRatio, MinRetriesPerSecond: DefaultMinRetriesPerSecond}
}

// Validate rejects limits no sane collector means: a budget out of range
// would let a bad answer start a storm.
func (b RetryBudget) Validate() error {
	if !(b.Ratio >= 0 && b.Ratio <= 1) || !(b.MinRetriesPerSecond >= 0 && b.MinRetriesPerSecond <= MaxMinRetriesPerSecond) {
		return fmt.Errorf("retry budget out of range: ratio %v (want 0 to 1), min_retries_per_second %v (want 0 to %d)",
			b.Ratio, b.MinRetriesPerSecond, MaxMinRetriesPerSecond)
	}
	return nil
}

// HintEdge is one learned edge: (service, Operation) → (PeerService,
// PeerOperation).
type HintEdge struct {
	// Operation is the inbound operation, named as the service's server
	// span is, e.g. "POST /checkout" or "shop.Checkout/Pay".
	Operation string `json:"operation"`
	// PeerService is the callee's service.name.
	PeerService string `json:"peer_service"`
	// PeerOperation is the callee's operation, named as its server span.
	PeerOperation string `json:"peer_operation"`
	// PeerAddresses are the addresses the service used to reach the peer
	// ("10.0.0.7:8080", "catalog.shop.svc"), as its client spans'
	// server.address and server.port say: what a client hook knows of a
	// callee at call time.
	PeerAddresses []string `json:"peer_addresses,omitempty"`
	// Mode is fail_open, fail_close or unknown; anything else reads as
	// unknown.
	Mode Mode `json:"mode"`
	// Confidence is the confidence bound behind Mode, in [0, 1].
	Confidence float64 `json:"confidence"`
	// Samples is how many inbound requests taught it.
	Samples int64 `json:"samples"`
}

// Validate rejects what a sane collector cannot have meant for service.
func (h *Hints) Validate(service string) error {
	switch {
	case h.Version != HintsVersion:
		return fmt.Errorf("version %d, want %d", h.Version, HintsVersion)
	case h.Service != "" && h.Service != service:
		return fmt.Errorf("hints for service %q, want %q", h.Service, service)
	case h.TTLSeconds < 0:
		return errors.New("negative ttl_seconds")
	}
	if h.RetryBudget != nil {
		return h.RetryBudget.Validate()
	}
	return nil
}

// Budget returns the retry budget the hints give, or the defaults.
func (h *Hints) Budget() RetryBudget {
	if h == nil || h.RetryBudget == nil {
		return DefaultRetryBudget()
	}
	return *h.RetryBudget
}
