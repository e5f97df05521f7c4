// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/errorownership/errorownership/hooks/hints"
	"github.com/errorownership/errorownership/internal/otlpfile"
	"github.com/errorownership/errorownership/ownership"
)

// The newcomer tests (newcomer_<language>_test.go) each set up a small
// service exactly as that language's hooks README says — the package
// installed from its packed artifact, the instrumentation at its default
// settings — and run it here against the built collector with the hints
// extension. The app (e2e/newcomer/<language>/) is started three
// times, as front, must and may:
//
//	GET /work/{id}?fail=a,b  calls MUST_URL/work/{id}?fail=a,b and then
//	MAY_URL/work/{id}?fail=a,b through the hooks' client, when set; then
//	answers 500 (503 without dependencies) when its own name is in fail,
//	else 502 when the must call failed, else 200.
//
// It prints 127.0.0.1:PORT as the first line of its standard output, takes
// the hints' base URL from HINTS_URL, and on SIGTERM shuts its SDK down and
// exits 0.

// newcomerStart starts one of the three services of a language's newcomer
// app as startApp does: name is its OTEL_SERVICE_NAME, otlp the
// collector's OTLP/HTTP host:port; env are HINTS_URL, MUST_URL and MAY_URL.
type newcomerStart func(t *testing.T, name, otlp string, env ...string) *appService

// newcomerProcessor is the processor of the hints extension's README, at
// test speed (see defaultProcessor). Each service exports its own batches
// every 200 ms: decision_wait leaves a loaded machine room to bring a
// trace's spans together, since a trace analysed in parts is set apart.
const newcomerProcessor = `    decision_wait: 1s
    flush_interval: 1s
    hints_extension: errorownership_hints
    edge_model:
      half_life: 0s
    rejudge:
      max_age: 5s`

// newcomerCase is one kind of request of the newcomer test: whom it makes
// fail, and what front must answer and record.
type newcomerCase struct {
	fail   string // the fail query: the services that fail on their own
	status int
	claim  string // the Error-Claim header front sends; "" for none
	reason string // the error_ownership.claim.reason on front's SERVER span
}

var (
	newcomerOK           = newcomerCase{fail: "", status: 200}
	newcomerTolerated    = newcomerCase{fail: "may", status: 200}
	newcomerOwn          = newcomerCase{fail: "front", status: 500, claim: "claimed", reason: "own"}
	newcomerPropagated   = newcomerCase{fail: "must", status: 502, claim: "unclaimed", reason: "propagated"}
	newcomerCoincidental = newcomerCase{fail: "front,may", status: 500, claim: "claimed", reason: "coincidental"}
)

// newcomerRequest is a request the test sent, by its trace.
type newcomerRequest struct {
	newcomerCase
	id string
}

// runNewcomer runs the three services against the collector and checks
// what front answered and what the spans say: own failures claimed and
// propagated ones unclaimed throughout, every coincidental error claimed
// once front's hints have arrived, every attempt span of front's with its
// attempt number, no span with dropped attributes, and no span for a hint
// poll.
func runNewcomer(t *testing.T, start newcomerStart) {
	collectorBin := buildCollector(t)
	hintsPort := freePort(t)
	hintsURL := fmt.Sprintf("http://127.0.0.1:%d", hintsPort)
	col := startCollectorWith(t, collectorBin, newcomerProcessor,
		extension{id: "errorownership_hints", config: fmt.Sprintf("    endpoint: 127.0.0.1:%d\n    ttl: 1s\n    refresh: 100ms", hintsPort)})

	must := start(t, "must", col.httpAddr, "HINTS_URL="+hintsURL)
	may := start(t, "may", col.httpAddr, "HINTS_URL="+hintsURL)
	front := start(t, "front", col.httpAddr, "HINTS_URL="+hintsURL,
		"MUST_URL=http://"+must.addr, "MAY_URL=http://"+may.addr)

	client := &http.Client{Timeout: time.Minute}
	defer client.CloseIdleConnections()
	traces := map[pcommon.TraceID]newcomerRequest{}
	n := 0
	// send makes one request to front in a trace of its own, as an
	// instrumented caller would, and checks the answer.
	send := func(c newcomerCase) (claim string) {
		t.Helper()
		n++
		var tid pcommon.TraceID
		var sid [8]byte
		_, _ = rand.Read(tid[:])
		_, _ = rand.Read(sid[:])
		req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://%s/work/%d?fail=%s", front.addr, n, c.fail), nil)
		require.NoError(t, err)
		req.Header.Set("traceparent", "00-"+hex.EncodeToString(tid[:])+"-"+hex.EncodeToString(sid[:])+"-01")
		res, err := client.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		traces[tid] = newcomerRequest{c, strconv.Itoa(n)}
		claim = res.Header.Get(ownership.HTTPClaimHeader)
		require.Equal(t, c.status, res.StatusCode, "front's status with fail=%q", c.fail)
		return claim
	}
	check := func(c newcomerCase) {
		t.Helper()
		assert.Equal(t, c.claim, send(c), "front's Error-Claim with fail=%q", c.fail)
	}

	// Learning: must's failures fail front, may's do not. Own and
	// propagated failures are claimed right from the first request.
	h := hints.New(hintsURL, "front")
	learned := func() bool {
		_, err := h.Refresh(context.Background())
		return err == nil && h.Mode("", "may", "") == ownership.ModeFailOpen && h.Mode("", "must", "") == ownership.ModeFailClose
	}
	deadline := time.Now().Add(3 * time.Minute)
	for !learned() {
		if time.Now().After(deadline) {
			doc, _ := h.Hints()
			t.Fatalf("after %d requests the collector has not learned front → may fail_open and front → must fail_close: %+v", n, doc)
		}
		for _, c := range []newcomerCase{newcomerTolerated, newcomerPropagated, newcomerOwn, newcomerOK, newcomerTolerated} {
			check(c)
		}
	}
	learnedAfter := n

	// A coincidental error is a request that failed while may's call failed
	// too: the model learns P(front fails | may's call failed alone), which
	// stays fail-open only while front's own failures are rare among them,
	// as they are in a service worth tolerating a dependency for. So each
	// coincidental error comes with nine tolerated failures of may.
	tolerate := func() {
		for range 9 {
			check(newcomerTolerated)
		}
	}

	// Arrival: front's hint client polls every ttl (1 s). Until its hints
	// arrive a coincidental error goes out as the hooks judge an unknown
	// edge; the first one claimed marks their arrival.
	var arrived bool
	for deadline := time.Now().Add(time.Minute); !arrived && time.Now().Before(deadline); {
		arrived = send(newcomerCoincidental) == "claimed"
		tolerate()
	}
	require.True(t, arrived, "front never claimed a coincidental error within a minute of the collector's hints saying may is fail-open; its log:\n%s", tail(front.log.String(), 4<<10))
	arrivedAfter := n

	// Measured: once the hints are there, every answer is right.
	measuredFrom := n + 1
	for range 10 {
		for _, c := range []newcomerCase{newcomerCoincidental, newcomerPropagated, newcomerOwn, newcomerOK} {
			check(c)
		}
		tolerate()
	}
	t.Logf("the collector had learned the edges after %d requests; front's hints arrived after %d; %d requests measured", learnedAfter, arrivedAfter, n-measuredFrom+1)

	for _, s := range []*appService{front, must, may} {
		require.NoError(t, s.terminate(t), "%s on SIGTERM", s.name)
	}
	_, err := col.Terminate(time.Minute)
	require.NoError(t, err)

	checkNewcomerSpans(t, col.outFile, traces, measuredFrom, hintsPort)
}

// checkNewcomerSpans reads the spans the collector wrote and checks front's
// SERVER span of every request, the attempt spans it made, and that no span
// dropped attributes or stands for a hint poll.
func checkNewcomerSpans(t *testing.T, outFile string, traces map[pcommon.TraceID]newcomerRequest, measuredFrom, hintsPort int) {
	t.Helper()
	type seen struct {
		server  ptrace.Span
		servers int
	}
	byTrace := map[pcommon.TraceID]*seen{}
	var spans, polls, dropped, attemptSpans, unnumbered int
	hintsPortText := strconv.Itoa(hintsPort)
	require.NoError(t, otlpfile.ReadFile(outFile, func(td ptrace.Traces) {
		for _, rs := range td.ResourceSpans().All() {
			service, _ := rs.Resource().Attributes().Get("service.name")
			for _, ss := range rs.ScopeSpans().All() {
				for _, sp := range ss.Spans().All() {
					spans++
					if isHintPoll(sp, hintsPortText) {
						polls++
						if polls <= 3 {
							t.Errorf("a span for a hint poll, from %s: %q %v", service.Str(), sp.Name(), sp.Attributes().AsRaw())
						}
					}
					if sp.DroppedAttributesCount() > 0 {
						dropped++
						if dropped <= 3 {
							t.Errorf("%s's span %q dropped %d attributes: %v", service.Str(), sp.Name(), sp.DroppedAttributesCount(), sp.Attributes().AsRaw())
						}
					}
					if service.Str() != "front" {
						continue
					}
					if _, ok := traces[sp.TraceID()]; !ok {
						continue
					}
					switch sp.Kind() {
					case ptrace.SpanKindServer:
						s := byTrace[sp.TraceID()]
						if s == nil {
							s = &seen{}
							byTrace[sp.TraceID()] = s
						}
						s.server = sp
						s.servers++
					case ptrace.SpanKindClient:
						attemptSpans++
						if _, ok := sp.Attributes().Get(ownership.AttrRetryAttempt); !ok {
							unnumbered++
							if unnumbered <= 3 {
								t.Errorf("front's CLIENT span %q has no %s: %v", sp.Name(), ownership.AttrRetryAttempt, sp.Attributes().AsRaw())
							}
						}
					}
				}
			}
		}
	}))
	t.Logf("%d spans; front's requests %d, its attempt spans %d (%d without their attempt number); hint polls traced %d; spans with dropped attributes %d",
		spans, len(traces), attemptSpans, unnumbered, polls, dropped)
	assert.Zero(t, unnumbered, "front's attempt spans without their attempt number")
	assert.Zero(t, polls, "spans for hint polls")
	assert.Zero(t, dropped, "spans with dropped attributes")

	var coincidental, claimedCoincidental int
	for tid, req := range traces {
		s := byTrace[tid]
		if !assert.NotNil(t, s, "front's SERVER span of request %s (fail=%q) was not exported", req.id, req.fail) {
			continue
		}
		assert.Equal(t, 1, s.servers, "front's SERVER spans in request %s's trace", req.id)
		attrs := s.server.Attributes()
		sent, _ := attrs.Get(ownership.AttrClaim)
		reason, _ := attrs.Get(ownership.AttrClaimReason)
		n, _ := strconv.Atoi(req.id)
		if req.newcomerCase == newcomerCoincidental {
			if n < measuredFrom {
				continue // before the hints arrived, or the request that showed they had
			}
			coincidental++
			if sent.Str() == "claimed" && reason.Str() == "coincidental" {
				claimedCoincidental++
			}
		}
		if req.claim == "" {
			assert.Empty(t, sent.Str(), "request %s (fail=%q): front's SERVER span claims nothing", req.id, req.fail)
			assert.Empty(t, reason.Str(), "request %s (fail=%q): front's SERVER span gives no reason", req.id, req.fail)
			continue
		}
		assert.Equal(t, req.claim, sent.Str(), "request %s (fail=%q): %s on front's SERVER span", req.id, req.fail, ownership.AttrClaim)
		assert.Equal(t, req.reason, reason.Str(), "request %s (fail=%q): %s on front's SERVER span", req.id, req.fail, ownership.AttrClaimReason)
	}
	t.Logf("coincidental errors after the hints arrived: %d, claimed as coincidental %d", coincidental, claimedCoincidental)
	assert.Positive(t, coincidental)
}

// isHintPoll says whether a span stands for a request to the hints: its
// name or an attribute names the hints' path, or a client span went to
// their port.
func isHintPoll(sp ptrace.Span, port string) bool {
	if strings.Contains(sp.Name(), ownership.HintsPath) {
		return true
	}
	poll := false
	for k, v := range sp.Attributes().All() {
		s := v.AsString()
		if strings.Contains(s, ownership.HintsPath) ||
			(sp.Kind() == ptrace.SpanKindClient && (k == "server.port" || k == "net.peer.port") && s == port) {
			poll = true
			break
		}
	}
	return poll
}
