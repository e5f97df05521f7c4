// SPDX-License-Identifier: Apache-2.0

// Package status reports a component's health through the collector's
// component status reporting (componentstatus), which a status-aware health
// check such as healthcheckv2 shows, from the several parts that make it up:
// the processor's store writer and its model reader, the hints extension's
// model reader.
package status

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
)

// Reporter reports a component's status from its parts' outcomes: OK while
// every part succeeds, a recoverable error naming each failing part
// otherwise. It reports only changes, so that a part retrying once a second
// does not flood the collector's status watchers, except that an error is
// reported a second time at the next failure: the first report may come
// while the component is starting, just before the collector reports it OK
// for having started, which would hide the error until it changed. It is
// safe for concurrent use.
type Reporter struct {
	host component.Host

	mu      sync.Mutex
	failing map[string]error
	last    string // what was reported last: "" for OK
	times   int    // how many times last was reported
	stopped bool
}

// New returns a reporter to host. A host that does not take status
// reports (one in a test, say) is told nothing.
func New(host component.Host) *Reporter {
	return &Reporter{host: host, failing: make(map[string]error)}
}

// Set records the outcome of part, nil for a success, and reports the
// component's status if that changed it.
func (r *Reporter) Set(part string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	if err == nil {
		delete(r.failing, part)
	} else {
		r.failing[part] = err
	}
	combined := r.combined()
	text := ""
	if combined != nil {
		text = combined.Error()
	}
	if text == r.last && (text == "" || r.times >= 2) {
		return
	}
	if text == r.last {
		r.times++
	} else {
		r.last, r.times = text, 1
	}
	if combined == nil {
		componentstatus.ReportStatus(r.host, componentstatus.NewEvent(componentstatus.StatusOK))
		return
	}
	componentstatus.ReportStatus(r.host, componentstatus.NewRecoverableErrorEvent(combined))
}

// Stop ends the reporting: the collector reports Stopping and Stopped
// itself, and a part still running must not report OK after them.
func (r *Reporter) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = true
}

// combined joins the failing parts' errors, in the parts' order, so that
// the same failures read the same.
func (r *Reporter) combined() error {
	if len(r.failing) == 0 {
		return nil
	}
	parts := make([]string, 0, len(r.failing))
	for p := range r.failing {
		parts = append(parts, p)
	}
	slices.Sort(parts)
	errs := make([]error, len(parts))
	for i, p := range parts {
		errs[i] = fmt.Errorf("%s: %w", p, r.failing[p])
	}
	return errors.Join(errs...)
}
