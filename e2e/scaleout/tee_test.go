// SPDX-License-Identifier: Apache-2.0

package scaleout

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// sink is an OTLP/HTTP endpoint that keeps the bodies it is sent, or
// refuses them.
type sink struct {
	srv    *httptest.Server
	mu     sync.Mutex
	bodies [][]byte
}

func newSink(t *testing.T, status int) *sink {
	s := &sink{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b bytes.Buffer
		_, _ = b.ReadFrom(r.Body)
		s.mu.Lock()
		s.bodies = append(s.bodies, b.Bytes())
		s.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *sink) addr() string { return strings.TrimPrefix(s.srv.URL, "http://") }

func (s *sink) received() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.bodies)
}

// export is one request of a server span and a client span of trace id.
func export(t *testing.T, id byte) []byte {
	td := ptrace.NewTraces()
	spans := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
	for i, kind := range []ptrace.SpanKind{ptrace.SpanKindServer, ptrace.SpanKindClient} {
		sp := spans.AppendEmpty()
		sp.SetTraceID([16]byte{id})
		sp.SetSpanID([8]byte{id, byte(i + 1)})
		sp.SetKind(kind)
	}
	body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	require.NoError(t, err)
	return body
}

func post(t *testing.T, url string, body []byte) {
	res, err := http.Post(url, "application/x-protobuf", bytes.NewReader(body)) //nolint:gosec // G107: url is the test's own loopback receiver
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
}

func TestTee(t *testing.T) {
	gateway, lb1, lb2 := newSink(t, http.StatusOK), newSink(t, http.StatusOK), newSink(t, http.StatusOK)
	tee, err := StartTee()
	require.NoError(t, err)
	defer tee.Close()
	tee.Send(Gateway, false, gateway.addr())
	tee.Send(LoadBalancer, true, lb1.addr(), lb2.addr())

	tee.BeginPhase()
	for _, id := range []byte{1, 2, 1} {
		post(t, tee.URL, export(t, id))
	}
	sent, traces := tee.Phase()
	assert.Equal(t, Sent{Requests: 3, Spans: 6, Inbound: 3, Traces: 2}, sent)
	assert.Len(t, traces, 2)
	assert.Equal(t, 3, gateway.received(), "every request, to the one collector")
	assert.Equal(t, 2, lb1.received(), "every other request, round robin")
	assert.Equal(t, 1, lb2.received(), "every other request, round robin")
	assert.Equal(t, export(t, 1), gateway.bodies[0], "byte for byte")
	assert.Len(t, tee.spans(LoadBalancer), 4, "the distinct spans sent, recorded")
	assert.Nil(t, tee.spans(Gateway), "not recorded")

	tee.Stop(Gateway)
	tee.BeginPhase()
	post(t, tee.URL, export(t, 3))
	sent, _ = tee.Phase()
	assert.Equal(t, Sent{Requests: 1, Spans: 2, Inbound: 1, Traces: 1}, sent)
	assert.Equal(t, 3, gateway.received(), "nothing after Stop")
	assert.Equal(t, Sent{Requests: 3, Spans: 6, Inbound: 3}, tee.Total(Gateway))
	assert.Equal(t, Sent{Requests: 4, Spans: 8, Inbound: 4}, tee.Total(LoadBalancer))
	assert.NoError(t, tee.Err())
}

func TestTeeRefused(t *testing.T) {
	refusing := newSink(t, http.StatusServiceUnavailable)
	tee, err := StartTee()
	require.NoError(t, err)
	defer tee.Close()
	tee.Send(Gateway, false, refusing.addr())
	// The services are told the export succeeded, so that they do not send
	// it again to the deployments that took it; the run fails on Err.
	post(t, tee.URL, export(t, 1))
	assert.ErrorContains(t, tee.Err(), "503")
	assert.Equal(t, 5, refusing.received(), "tried five times")
}
