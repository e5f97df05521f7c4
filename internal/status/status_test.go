// SPDX-License-Identifier: Apache-2.0

package status

import (
	"errors"
	"sync"
	"testing"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
)

// recordingHost is a collector host that keeps the status events it is sent.
type recordingHost struct {
	mu     sync.Mutex
	events []*componentstatus.Event
}

func (h *recordingHost) GetExtensions() map[component.ID]component.Component { return nil }

func (h *recordingHost) Report(ev *componentstatus.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, ev)
}

func TestReporterReportsChanges(t *testing.T) {
	refused := errors.New("password authentication failed")
	down := errors.New("connection refused")
	type step struct {
		part string
		err  error
		// want is the status reported after the step, and wantErr its
		// error's text; no report is wanted where report is false.
		report  bool
		want    componentstatus.Status
		wantErr string
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"successes report nothing: the collector reports OK once started", []step{
			{"writer", nil, false, 0, ""},
			{"writer", nil, false, 0, ""},
		}},
		{"a failure, twice, then no more until recovery", []step{
			{"writer", refused, true, componentstatus.StatusRecoverableError, "writer: password authentication failed"},
			{"writer", refused, true, componentstatus.StatusRecoverableError, "writer: password authentication failed"},
			{"writer", refused, false, 0, ""},
			{"writer", nil, true, componentstatus.StatusOK, ""},
			{"writer", nil, false, 0, ""},
		}},
		{"two parts: OK only when both recover", []step{
			{"writer", refused, true, componentstatus.StatusRecoverableError, "writer: password authentication failed"},
			{"model", down, true, componentstatus.StatusRecoverableError, "model: connection refused\nwriter: password authentication failed"},
			{"writer", nil, true, componentstatus.StatusRecoverableError, "model: connection refused"},
			{"model", nil, true, componentstatus.StatusOK, ""},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := &recordingHost{}
			r := New(h)
			for i, s := range c.steps {
				before := len(h.events)
				r.Set(s.part, s.err)
				if !s.report {
					if len(h.events) != before {
						t.Fatalf("step %d: reported %v; want no report", i, h.events[len(h.events)-1].Status())
					}
					continue
				}
				if len(h.events) != before+1 {
					t.Fatalf("step %d: %d reports; want one", i, len(h.events)-before)
				}
				ev := h.events[len(h.events)-1]
				if ev.Status() != s.want {
					t.Errorf("step %d: status %v; want %v", i, ev.Status(), s.want)
				}
				gotErr := ""
				if ev.Err() != nil {
					gotErr = ev.Err().Error()
				}
				if gotErr != s.wantErr {
					t.Errorf("step %d: error %q; want %q", i, gotErr, s.wantErr)
				}
			}
		})
	}
}

func TestReporterStopped(t *testing.T) {
	h := &recordingHost{}
	r := New(h)
	r.Set("writer", errors.New("down"))
	r.Stop()
	r.Set("writer", nil)
	if len(h.events) != 1 {
		t.Errorf("%d reports; want only the one before Stop", len(h.events))
	}
}
