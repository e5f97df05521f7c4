// SPDX-License-Identifier: Apache-2.0

package scenario

import (
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/errorownership/errorownership/ownership"
)

// Scenario is one story of error ownership: its traces and the figures
// the dependency analysis must find in them.
type Scenario struct {
	// Name names the scenario and its files, such as "chain_ownership".
	Name string
	// Story tells in a few sentences what happens.
	Story string
	// Traces holds every span of the scenario.
	Traces ptrace.Traces
	// Expected holds the figures, worked out by hand.
	Expected Expected

	truth truth
}

// Expected holds the figures the analysis must find in a scenario, worked
// out by hand from the rules of docs/design.md §4 and §5, with the edge model learned over
// all the scenario's traces before any verdict is given and no time decay.
type Expected struct {
	// Roots counts root requests: SERVER spans with no parent, or whose
	// parent is a CLIENT span with no parent (a client at the edge, or
	// context lost inside the caller).
	Roots int `json:"roots"`
	// Services holds, per service.name, what its inbound spans add up to.
	Services map[string]ServiceExpectation `json:"services"`
	// Edges lists edges whose mode the model must learn.
	Edges []EdgeExpectation `json:"edges"`
	// StormRadius holds, per root operation keyed "service operation", the
	// retry-storm radius: the longest chain of nested logical calls that
	// were retried (each made by a request that an attempt of the previous
	// one served), the maximum over the traces.
	StormRadius map[string]int `json:"storm_radius,omitempty"`
	// BrokenContext counts parentless CLIENT and PRODUCER spans.
	BrokenContext int `json:"broken_context,omitempty"`
	// OrphanSpans counts spans whose parent ID is set but names no span of
	// the trace.
	OrphanSpans int `json:"orphan_spans,omitempty"`
}

// ServiceExpectation is what one service's inbound spans add up to. The
// claim and verdict counts are over its failed inbound spans only.
type ServiceExpectation struct {
	// Served counts the service's SERVER and CONSUMER spans, retries
	// included.
	Served int `json:"served"`
	// RetriesReceived counts inbound spans whose parent CLIENT attempt was
	// a retry, marked (attempt number > 0) or not (inferred).
	RetriesReceived int `json:"retries_received"`
	// Verdicts counts failed inbound spans by verdict: own, propagated,
	// coincidental.
	Verdicts map[string]int `json:"verdicts,omitempty"`
	// ExpectedClaims counts failed inbound spans by the claim the rules say
	// the service should send: claimed, unclaimed.
	ExpectedClaims map[string]int `json:"expected_claims,omitempty"`
	// SentClaims counts failed inbound spans by the claim error_ownership.claim.sent says
	// the service sent: claimed, unclaimed, missing.
	SentClaims map[string]int `json:"sent_claims,omitempty"`
}

// EdgeExpectation is the mode the model must learn for one edge.
type EdgeExpectation struct {
	Service       string `json:"service"`
	Operation     string `json:"operation"`
	PeerService   string `json:"peer_service"`
	PeerOperation string `json:"peer_operation"`
	// Mode is the edge's mode, spelt as the hints spell it.
	Mode ownership.Mode `json:"mode"`
}
