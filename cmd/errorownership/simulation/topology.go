// SPDX-License-Identifier: Apache-2.0

// Package simulation is the retry-storm simulator behind `errorownership demo`:
// a topology of real net/http services on loopback, instrumented with the
// OpenTelemetry SDK and exporting OTLP/HTTP to an in-process errorownership
// processor that writes to PostgreSQL, driven under three retry policies
// (retry every hop, a retry budget, error ownership) with ground truth kept
// for every root request.
package simulation

import (
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"
)

// Topology is a set of services and their calls, read from YAML:
//
//	root: a
//	services:
//	  - name: a
//	    edges: [{callee: b}]
//	  - name: d
//	    fault: {rate: 1}
//	    latency: 1ms
//	    edges: [{callee: e}, {callee: x, fail_open: true}]
type Topology struct {
	// Root is the user-facing service the simulator calls.
	Root     string    `yaml:"root"`
	Services []Service `yaml:"services"`
}

// Service is one simulated service. Its handler calls its edges in order,
// stops at the first failed fail-close call (answering 500, a propagated
// error), then fails on its own with the fault's rate, then sleeps Latency.
type Service struct {
	Name    string        `yaml:"name"`
	Edges   []Edge        `yaml:"edges"`
	Fault   Fault         `yaml:"fault"`
	Latency time.Duration `yaml:"latency"`
}

// Edge is one outbound call.
type Edge struct {
	Callee string `yaml:"callee"`
	// FailOpen: the caller tolerates the call's failure.
	FailOpen bool `yaml:"fail_open"`
}

// Fault injects the service's own errors: each request fails with
// probability Rate, or the rate of the latest Schedule step begun.
type Fault struct {
	Rate     float64     `yaml:"rate"`
	Schedule []FaultStep `yaml:"schedule"`
}

// FaultStep changes a fault's rate After the run started.
type FaultStep struct {
	After time.Duration `yaml:"after"`
	Rate  float64       `yaml:"rate"`
}

// RateAt returns the fault rate at elapsed time since the run started.
func (f Fault) RateAt(elapsed time.Duration) float64 {
	r := f.Rate
	for _, s := range f.Schedule {
		if elapsed >= s.After {
			r = s.Rate
		}
	}
	return r
}

// ParseTopology reads and checks a YAML topology.
func ParseTopology(b []byte) (*Topology, error) {
	var t Topology
	if err := yaml.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("topology: %w", err)
	}
	return &t, t.Validate()
}

// Validate checks names, edges and rates; calls must form no cycle.
func (t *Topology) Validate() error {
	byName := map[string]*Service{}
	for i := range t.Services {
		s := &t.Services[i]
		if s.Name == "" {
			return fmt.Errorf("topology: service %d has no name", i)
		}
		if byName[s.Name] != nil {
			return fmt.Errorf("topology: service %q twice", s.Name)
		}
		if s.Fault.Rate < 0 || s.Fault.Rate > 1 {
			return fmt.Errorf("topology: %s: fault rate %v must be in [0, 1]", s.Name, s.Fault.Rate)
		}
		byName[s.Name] = s
	}
	if byName[t.Root] == nil {
		return fmt.Errorf("topology: root %q is not a service", t.Root)
	}
	state := map[string]int{}
	var visit func(string) error
	visit = func(n string) error {
		switch state[n] {
		case 1:
			return fmt.Errorf("topology: call cycle through %q", n)
		case 2:
			return nil
		}
		state[n] = 1
		for _, e := range byName[n].Edges {
			if byName[e.Callee] == nil {
				return fmt.Errorf("topology: %s calls unknown service %q", n, e.Callee)
			}
			if err := visit(e.Callee); err != nil {
				return err
			}
		}
		state[n] = 2
		return nil
	}
	return visit(t.Root)
}

// Service returns the named service, or nil.
func (t *Topology) Service(name string) *Service {
	for i := range t.Services {
		if t.Services[i].Name == name {
			return &t.Services[i]
		}
	}
	return nil
}

// ChainYAML is the chain of docs/design.md §1, A→B→…→G with D always failing on its own
// after its downstream calls succeeded.
const ChainYAML = `
root: a
services:
  - {name: a, edges: [{callee: b}]}
  - {name: b, edges: [{callee: c}]}
  - {name: c, edges: [{callee: d}]}
  - {name: d, edges: [{callee: e}], fault: {rate: 1}}
  - {name: e, edges: [{callee: f}]}
  - {name: f, edges: [{callee: g}]}
  - {name: g}
`

// CheckoutYAML is the coincidental-error scenario: checkout tolerates
// recommendations failing (fail-open), not payments (fail-close), and fails
// on its own too.
const CheckoutYAML = `
root: checkout
services:
  - name: checkout
    edges: [{callee: recommendations, fail_open: true}, {callee: payments}]
    fault: {rate: 0.10}
  - {name: recommendations, fault: {rate: 0.30}}
  - {name: payments, fault: {rate: 0.05}}
`

// Chain parses the built-in chain topology, ChainYAML.
func Chain() *Topology { return mustParse(ChainYAML) }

// Checkout parses the built-in checkout topology, CheckoutYAML.
func Checkout() *Topology { return mustParse(CheckoutYAML) }

func mustParse(s string) *Topology {
	t, err := ParseTopology([]byte(s))
	if err != nil {
		panic(err)
	}
	return t
}
