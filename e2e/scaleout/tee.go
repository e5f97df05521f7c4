// SPDX-License-Identifier: Apache-2.0

package scaleout

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// Sent counts what a deployment was sent.
type Sent struct {
	// Requests are OTLP export requests; Spans their spans, and Inbound
	// those that are SERVER or CONSUMER spans: the requests served the
	// store must count once each.
	Requests, Spans, Inbound int
	// Traces counts distinct trace IDs.
	Traces int
}

// spanKey identifies a span: its trace and span IDs.
type spanKey struct {
	trace [16]byte
	span  [8]byte
}

// destination is a deployment as the tee sends to it: one OTLP/HTTP
// endpoint, or several taken in turn, as a round-robin load balancer does.
type destination struct {
	name    string
	urls    []string
	next    int
	stopped bool
	total   Sent // since the tee started
	// spans records every span sent, when the run must account for each.
	spans map[spanKey]struct{}
}

// Tee is the OTLP/HTTP endpoint the simulated services export to. It sends
// every request on, byte for byte, to every deployment, so that each gets
// exactly the same spans, and counts what it sent.
type Tee struct {
	// URL is the endpoint, http://127.0.0.1:PORT/v1/traces.
	URL string

	srv    *http.Server
	client *http.Client

	mu     sync.Mutex
	dests  []*destination
	phase  Sent
	traces map[[16]byte]struct{} // of the phase
	err    error                 // the first request a deployment refused
}

// StartTee starts a tee on a free loopback port, sending to nothing yet.
func StartTee() (*Tee, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	t := &Tee{
		URL:    "http://" + ln.Addr().String() + "/v1/traces",
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 32}},
		traces: make(map[[16]byte]struct{}),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", t.receive)
	t.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = t.srv.Serve(ln) }()
	return t, nil
}

// Close stops the tee.
func (t *Tee) Close() error {
	t.client.CloseIdleConnections()
	return t.srv.Close()
}

// Send starts sending to a deployment, reached at the OTLP/HTTP addresses
// given (in turn when there are several). With record, every span sent to
// it is remembered.
func (t *Tee) Send(name string, record bool, otlpAddrs ...string) {
	d := &destination{name: name}
	for _, a := range otlpAddrs {
		d.urls = append(d.urls, "http://"+a+"/v1/traces")
	}
	if record {
		d.spans = make(map[spanKey]struct{})
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.dests = append(t.dests, d)
}

// Stop stops sending to the named deployment.
func (t *Tee) Stop(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if d := t.dest(name); d != nil {
		d.stopped = true
	}
}

// dest returns the named deployment. Call with mu held.
func (t *Tee) dest(name string) *destination {
	for _, d := range t.dests {
		if d.name == name {
			return d
		}
	}
	return nil
}

// BeginPhase starts counting a new phase's requests.
func (t *Tee) BeginPhase() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.phase = Sent{}
	t.traces = make(map[[16]byte]struct{})
}

// Phase returns what was sent since BeginPhase, to every deployment, and
// the trace IDs; the caller must not change the map.
func (t *Tee) Phase() (Sent, map[[16]byte]struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.phase, t.traces
}

// Total returns what the named deployment was sent since the tee started
// (but for Traces, which only Phase counts).
func (t *Tee) Total(name string) Sent {
	t.mu.Lock()
	defer t.mu.Unlock()
	if d := t.dest(name); d != nil {
		return d.total
	}
	return Sent{}
}

// spans returns every span sent to the named deployment, if it records
// them; the caller must not change the map, nor call it while requests
// are being sent.
func (t *Tee) spans(name string) map[spanKey]struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if d := t.dest(name); d != nil {
		return d.spans
	}
	return nil
}

// Err returns the first request a deployment did not accept.
func (t *Tee) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

func (t *Tee) receive(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	td, err := decode(body, r.Header.Get("Content-Encoding"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var n Sent
	n.Requests = 1
	var keys []spanKey
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, sp := range ss.Spans().All() {
				n.Spans++
				if k := sp.Kind(); k == ptrace.SpanKindServer || k == ptrace.SpanKindConsumer {
					n.Inbound++
				}
				keys = append(keys, spanKey{sp.TraceID(), sp.SpanID()})
			}
		}
	}

	// Each deployment's endpoint is picked, and the counts kept, under the
	// lock, so that the counts say exactly what each was sent.
	type send struct {
		dest *destination
		url  string
	}
	var sends []send
	t.mu.Lock()
	t.phase.Requests++
	t.phase.Spans += n.Spans
	t.phase.Inbound += n.Inbound
	for _, k := range keys {
		if _, ok := t.traces[k.trace]; !ok {
			t.traces[k.trace] = struct{}{}
			t.phase.Traces++
		}
	}
	for _, d := range t.dests {
		if d.stopped {
			continue
		}
		sends = append(sends, send{d, d.urls[d.next%len(d.urls)]})
		d.next++
		d.total.Requests++
		d.total.Spans += n.Spans
		d.total.Inbound += n.Inbound
		if d.spans != nil {
			for _, k := range keys {
				d.spans[k] = struct{}{}
			}
		}
	}
	t.mu.Unlock()

	var wg sync.WaitGroup
	errs := make([]error, len(sends))
	for i, s := range sends {
		wg.Go(func() { errs[i] = t.forward(r.Context(), s.url, r.Header, body) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.mu.Lock()
		if t.err == nil {
			t.err = err
		}
		t.mu.Unlock()
	}
	// The services are told the export succeeded either way: a retry would
	// send the spans again to the deployments that did take them. The run
	// fails on Err instead.
	out, _ := ptraceotlp.NewExportResponse().MarshalProto()
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// forward posts the request to url, trying again a few times if it fails,
// as an exporter with retry_on_failure would.
func (t *Tee) forward(ctx context.Context, url string, h http.Header, body []byte) error {
	var last error
	for attempt := range 5 {
		if attempt > 0 {
			time.Sleep(time.Duration(attempt) * 200 * time.Millisecond)
		}
		req, err := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", h.Get("Content-Type"))
		if ce := h.Get("Content-Encoding"); ce != "" {
			req.Header.Set("Content-Encoding", ce)
		}
		res, err := t.client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %s", res.Status)
		}
		last = err
	}
	return fmt.Errorf("%s refused a request 5 times: %w", url, last)
}

// decode reads an OTLP/HTTP protobuf export request.
func decode(body []byte, encoding string) (ptrace.Traces, error) {
	if encoding == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return ptrace.Traces{}, err
		}
		if body, err = io.ReadAll(zr); err != nil {
			return ptrace.Traces{}, err
		}
	}
	req := ptraceotlp.NewExportRequest()
	if err := req.UnmarshalProto(body); err != nil {
		return ptrace.Traces{}, err
	}
	return req.Traces(), nil
}
