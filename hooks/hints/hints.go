// Package hints is the client side of the ownership hints: the JSON a
// collector's errorownership processor serves at GET /v1/hints?service=NAME
// (the types below are that contract), and a Client that polls it and
// answers the hooks' questions — which edges are fail-open, how big the
// retry budget is — falling back to safe defaults when it cannot.
package hints

import (
	"time"

	"github.com/errorownership/errorownership/hooks"
)

// Version is the hints format this package reads. A document with another
// version is rejected as a whole, so an incompatible change can never be
// half understood.
const Version = 1

// Path is where the collector serves hints; the service is the query
// parameter "service".
const Path = "/v1/hints"

// Hints is the document a collector serves for one service:
//
//	{"version":1,"service":"checkout","generated_at":"2026-11-29T16:00:00Z","ttl_seconds":30,
//	 "retry_budget":{"ratio":0.1,"min_retries_per_second":10},
//	 "edges":[{"operation":"POST /checkout","peer_service":"recommendations",
//	           "peer_operation":"GET /recommendations","peer_addresses":["10.0.0.7:8080"],
//	           "mode":"fail_open","confidence":0.95,"samples":175}]}
type Hints struct {
	// Version is the format version, Version.
	Version int `json:"version"`
	// Service is the service.name the hints are for.
	Service string `json:"service"`
	// GeneratedAt is when the collector computed the hints.
	GeneratedAt time.Time `json:"generated_at"`
	// TTLSeconds is how long the hints stay fresh; the client polls again
	// after it (a Cache-Control max-age on the response takes precedence).
	TTLSeconds int `json:"ttl_seconds"`
	// RetryBudget is the service's retry budget; absent means the defaults.
	RetryBudget *RetryBudget `json:"retry_budget,omitempty"`
	// Edges are the service's learned edges. Edges not listed are unknown,
	// which the hooks treat as fail-close.
	Edges []Edge `json:"edges"`
}

// RetryBudget is a retry budget's limits (hooks.Limits).
type RetryBudget struct {
	// Ratio is retries allowed per request, in [0, 1].
	Ratio float64 `json:"ratio"`
	// MinRetriesPerSecond is the floor of retries always allowed.
	MinRetriesPerSecond float64 `json:"min_retries_per_second"`
}

// Edge is one learned edge: (service, Operation) → (PeerService,
// PeerOperation).
type Edge struct {
	// Operation is the inbound operation, named as the service's server
	// span is, e.g. "POST /checkout" or "shop.Checkout/Pay".
	Operation string `json:"operation"`
	// PeerService is the callee's service.name.
	PeerService string `json:"peer_service"`
	// PeerOperation is the callee's operation, named as its server span.
	PeerOperation string `json:"peer_operation"`
	// PeerAddresses are the addresses the service used to reach the peer
	// ("10.0.0.7:8080", "catalog.shop.svc"), as its client spans' server.address
	// and server.port say: what a client hook knows of a callee at call time.
	PeerAddresses []string `json:"peer_addresses,omitempty"`
	// Mode is fail_open, fail_close or unknown; anything else reads as
	// unknown.
	Mode hooks.Mode `json:"mode"`
	// Confidence is the confidence bound behind Mode, in [0, 1].
	Confidence float64 `json:"confidence"`
	// Samples is how many inbound requests with a failed call taught it.
	Samples int64 `json:"samples"`
}

// Limits returns the budget limits the hints give, or the defaults.
func (h *Hints) Limits() hooks.Limits {
	if h == nil || h.RetryBudget == nil {
		return hooks.DefaultLimits()
	}
	return hooks.Limits{Ratio: h.RetryBudget.Ratio, MinPerSecond: h.RetryBudget.MinRetriesPerSecond}
}
