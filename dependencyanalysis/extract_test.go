// SPDX-License-Identifier: Apache-2.0

package dependencyanalysis

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/errorownership/errorownership/ownership"
)

func TestExtractClassifies(t *testing.T) {
	tests := []struct {
		name    string
		kind    ptrace.SpanKind
		status  ptrace.StatusCode
		attrs   map[string]any
		cfg     func(*Config)
		failed  bool
		timeout bool
	}{
		{name: "HTTP 500 on a server span", kind: ptrace.SpanKindServer, attrs: map[string]any{"http.response.status_code": 500}, failed: true},
		{name: "HTTP 503 sent as a string", kind: ptrace.SpanKindServer, attrs: map[string]any{"http.response.status_code": "503"}, failed: true},
		{name: "HTTP 404 is the caller's fault", kind: ptrace.SpanKindServer, attrs: map[string]any{"http.response.status_code": 404}},
		{name: "HTTP 404 on a client span with status error", kind: ptrace.SpanKindClient, status: ptrace.StatusCodeError, attrs: map[string]any{"http.response.status_code": 404}},
		{name: "HTTP 404 when 4xx are errors", kind: ptrace.SpanKindServer, attrs: map[string]any{"http.response.status_code": 404},
			cfg: func(c *Config) { c.Classification.HTTPClientErrors = true }, failed: true},
		{name: "the old http.status_code", kind: ptrace.SpanKindServer, attrs: map[string]any{"http.status_code": 502}, failed: true},
		{name: "HTTP 504 is a timeout", kind: ptrace.SpanKindServer, attrs: map[string]any{"http.response.status_code": 504}, failed: true, timeout: true},
		{name: "gRPC UNAVAILABLE as rpc.grpc.status_code", kind: ptrace.SpanKindServer, attrs: map[string]any{"rpc.grpc.status_code": 14}, failed: true},
		{name: "gRPC INTERNAL as rpc.response.status_code name", kind: ptrace.SpanKindServer, attrs: map[string]any{"rpc.response.status_code": "INTERNAL"}, failed: true},
		{name: "gRPC DATA_LOSS as rpc.status_code", kind: ptrace.SpanKindServer, attrs: map[string]any{"rpc.status_code": 15}, failed: true},
		{name: "gRPC NOT_FOUND wins over status error", kind: ptrace.SpanKindServer, status: ptrace.StatusCodeError, attrs: map[string]any{"rpc.grpc.status_code": 5}},
		{name: "gRPC DEADLINE_EXCEEDED is a timeout", kind: ptrace.SpanKindClient, attrs: map[string]any{"rpc.grpc.status_code": 4}, failed: true, timeout: true},
		{name: "gRPC RESOURCE_EXHAUSTED when configured", kind: ptrace.SpanKindServer, attrs: map[string]any{"rpc.grpc.status_code": 8},
			cfg: func(c *Config) { c.Classification.GRPCErrorCodes = []string{"RESOURCE_EXHAUSTED"} }, failed: true},
		{name: "an unknown gRPC code falls back to the status", kind: ptrace.SpanKindServer, status: ptrace.StatusCodeError, attrs: map[string]any{"rpc.grpc.status_code": 99}, failed: true},
		{name: "status error alone", kind: ptrace.SpanKindClient, status: ptrace.StatusCodeError, failed: true},
		{name: "status ok", kind: ptrace.SpanKindServer, status: ptrace.StatusCodeOk},
		{name: "error.type timeout", kind: ptrace.SpanKindServer, status: ptrace.StatusCodeError, attrs: map[string]any{"error.type": "TimeoutError"}, failed: true, timeout: true},
		{name: "error.type configured as a timeout", kind: ptrace.SpanKindServer, status: ptrace.StatusCodeError, attrs: map[string]any{"error.type": "ETIMEDOUT"},
			cfg: func(c *Config) { c.Classification.TimeoutErrorTypes = []string{"etimedout"} }, failed: true, timeout: true},
		{name: "error.type on a success is no timeout", kind: ptrace.SpanKindServer, attrs: map[string]any{"error.type": "timeout", "http.response.status_code": 200}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			require.NoError(t, cfg.Validate())
			td, s := oneSpan("svc")
			s.SetKind(tt.kind)
			s.Status().SetCode(tt.status)
			require.NoError(t, s.Attributes().FromRaw(tt.attrs))
			recs := NewExtractor(cfg, NewSymbols(0)).Append(nil, td)
			require.Len(t, recs, 1)
			assert.Equal(t, tt.failed, recs[0].Failed(), "failed")
			assert.Equal(t, tt.timeout, recs[0].TimedOut(), "timeout")
		})
	}
}

func TestExtractNamesAndOwnership(t *testing.T) {
	tests := []struct {
		name     string
		kind     ptrace.SpanKind
		attrs    map[string]any
		cfg      func(*Config)
		peer     string
		peerOp   string
		address  string
		target   string // method and path hashed into Span.Target
		attempt  int8
		claim    ownership.Claim
		claimRx  ownership.Claim
		decision ownership.RetryDecision
	}{
		{name: "HTTP client with a template", kind: ptrace.SpanKindClient,
			attrs: map[string]any{"service.peer.name": "users", "peer.service": "old", "http.request.method": "GET", "url.template": "/users/{id}"},
			peer:  "users", peerOp: "GET /users/{id}", attempt: AttemptUnknown},
		{name: "the first peer name in the list wins, whatever the order", kind: ptrace.SpanKindClient,
			attrs: map[string]any{"messaging.destination.name": "queue", "peer.service": "old", "service.peer.name": "users"},
			peer:  "users", peerOp: "op", attempt: AttemptUnknown},
		{name: "an empty peer name gives way to the next", kind: ptrace.SpanKindClient,
			attrs: map[string]any{"service.peer.name": "", "peer.service": "old"},
			peer:  "old", peerOp: "op", attempt: AttemptUnknown},
		{name: "older peer.service and http.route", kind: ptrace.SpanKindClient,
			attrs: map[string]any{"peer.service": "users", "http.route": "/users"},
			peer:  "users", peerOp: "/users", attempt: AttemptUnknown},
		{name: "server.address is the address, not the peer", kind: ptrace.SpanKindClient,
			attrs: map[string]any{"server.address": "db.internal"}, address: "db.internal", peerOp: "op", attempt: AttemptUnknown},
		{name: "otelhttp: address with port, target from url.full", kind: ptrace.SpanKindClient,
			attrs: map[string]any{"http.request.method": "GET", "server.address": "127.0.0.1", "server.port": 8080,
				"url.full": "http://127.0.0.1:8080/items/42?x=1#f"},
			address: "127.0.0.1:8080", target: "GET /items/42", peerOp: "op", attempt: AttemptUnknown},
		{name: "an IPv6 address", kind: ptrace.SpanKindClient,
			attrs:   map[string]any{"server.address": "::1", "server.port": 9000, "url.path": "/x", "http.request.method": "POST"},
			address: "[::1]:9000", target: "POST /x", peerOp: "op", attempt: AttemptUnknown},
		{name: "older net.peer.name, net.peer.port and http.url", kind: ptrace.SpanKindClient,
			attrs:   map[string]any{"net.peer.name": "cart", "net.peer.port": "81", "http.url": "http://cart:81", "http.method": "GET"},
			address: "cart:81", target: "GET /", peerOp: "op", attempt: AttemptUnknown},
		{name: "requests' old conventions: the address from http.url alone", kind: ptrace.SpanKindClient,
			attrs:   map[string]any{"http.method": "GET", "http.url": "http://127.0.0.1:36411/work/7?fail=a", "http.status_code": 503},
			address: "127.0.0.1:36411", target: "GET /work/7", peerOp: "op", attempt: AttemptUnknown},
		{name: "url.full alone, the scheme's default port left out", kind: ptrace.SpanKindClient,
			attrs:   map[string]any{"http.request.method": "GET", "url.full": "https://user@api.example.com/v2"},
			address: "api.example.com", target: "GET /v2", peerOp: "op", attempt: AttemptUnknown},
		{name: "an IPv6 literal in the URL", kind: ptrace.SpanKindClient,
			attrs:   map[string]any{"http.url": "http://[::1]:9200/search"},
			address: "[::1]:9200", target: " /search", peerOp: "op", attempt: AttemptUnknown},
		{name: "server.address wins over the URL's host", kind: ptrace.SpanKindClient,
			attrs:   map[string]any{"server.address": "cart.svc", "server.port": 8080, "url.full": "http://10.0.0.9:8080/x"},
			address: "cart.svc:8080", target: " /x", peerOp: "op", attempt: AttemptUnknown},
		{name: "a URL without a host names no address", kind: ptrace.SpanKindClient,
			attrs:  map[string]any{"http.url": "/relative/path"},
			target: " /relative/path", peerOp: "op", attempt: AttemptUnknown},
		{name: "otelgrpc: address from the target", kind: ptrace.SpanKindClient,
			attrs:   map[string]any{"rpc.service": "shop.Cart", "rpc.method": "Add", "server.address": "cart.svc", "server.port": 443},
			address: "cart.svc:443", peerOp: "shop.Cart/Add", attempt: AttemptUnknown},
		{name: "gRPC client", kind: ptrace.SpanKindClient,
			attrs: map[string]any{"rpc.service": "shop.Cart", "rpc.method": "Add", "service.peer.name": "cart"},
			peer:  "cart", peerOp: "shop.Cart/Add", attempt: AttemptUnknown},
		{name: "resend count is the attempt", kind: ptrace.SpanKindClient,
			attrs: map[string]any{"http.request.resend_count": 2, "error_ownership.retry.attempt": 7}, peerOp: "op", attempt: 2},
		{name: "error_ownership.retry.attempt from the hooks", kind: ptrace.SpanKindClient,
			attrs:  map[string]any{ownership.AttrRetryAttempt: 1, ownership.AttrClaimReceived: "claimed", ownership.AttrRetryDecision: "suppressed_budget"},
			peerOp: "op", attempt: 1, claimRx: ownership.ClaimClaimed, decision: ownership.DecisionSuppressedBudget},
		{name: "an overridden attempt attribute", kind: ptrace.SpanKindClient,
			attrs: map[string]any{"x.try": 3, "error_ownership.retry.attempt": 1},
			cfg:   func(c *Config) { c.Attributes.RetryAttempt = []string{"x.try"} }, peerOp: "op", attempt: 3},
		{name: "an overridden peer attribute", kind: ptrace.SpanKindClient,
			attrs: map[string]any{"app.peer": "billing", "service.peer.name": "ignored"},
			cfg:   func(c *Config) { c.Attributes.PeerService = []string{"app.peer"} }, peer: "billing", peerOp: "op", attempt: AttemptUnknown},
		{name: "server span claims", kind: ptrace.SpanKindServer,
			attrs: map[string]any{ownership.AttrClaim: "Unclaimed"}, claim: ownership.ClaimUnclaimed, attempt: AttemptUnknown},
		{name: "a malformed claim is missing", kind: ptrace.SpanKindServer,
			attrs: map[string]any{ownership.AttrClaim: "claimed!"}, claim: ownership.ClaimMissing, attempt: AttemptUnknown},
		{name: "server spans have no peer", kind: ptrace.SpanKindServer,
			attrs: map[string]any{"service.peer.name": "x"}, attempt: AttemptUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			syms := NewSymbols(0)
			td, s := oneSpan("svc")
			s.SetKind(tt.kind)
			require.NoError(t, s.Attributes().FromRaw(tt.attrs))
			r := NewExtractor(cfg, syms).Append(nil, td)[0]
			assert.Equal(t, tt.peer, syms.Name(r.PeerService), "peer")
			assert.Equal(t, tt.peerOp, syms.Name(r.PeerOperation), "peer operation")
			assert.Equal(t, tt.address, syms.Name(r.PeerAddress), "address")
			if tt.target != "" {
				method, path, _ := strings.Cut(tt.target, " ")
				assert.Equal(t, target(&spanAttrs{method: method, path: path}), r.Target, "target")
				assert.NotZero(t, r.Target)
			} else {
				assert.Zero(t, r.Target, "target")
			}
			assert.Equal(t, tt.attempt, r.Attempt, "attempt")
			assert.Equal(t, tt.claim, r.Claim(), "claim")
			assert.Equal(t, tt.claimRx, r.ClaimReceived(), "claim received")
			assert.Equal(t, tt.decision, r.Decision(), "decision")
			assert.Equal(t, "svc", syms.Name(r.Service))
			if tt.kind == ptrace.SpanKindServer {
				assert.Equal(t, "op", syms.Name(r.Operation))
			} else {
				assert.Equal(t, NoSymbol, r.Operation, "outbound spans need only the peer operation")
			}
		})
	}
}

func TestExtractSkipsMalformed(t *testing.T) {
	td, s := oneSpan("")
	s.SetSpanID(pcommon.SpanID{})
	ok := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().AppendEmpty()
	ok.SetTraceID(pcommon.TraceID{1})
	ok.SetSpanID(pcommon.SpanID{2})
	ok.SetStartTimestamp(10)
	ok.SetEndTimestamp(5) // ends before it starts
	syms := NewSymbols(0)
	ex := NewExtractor(DefaultConfig(), syms)
	recs := ex.Append(nil, td)
	require.Len(t, recs, 1)
	assert.EqualValues(t, 1, ex.Malformed)
	assert.Equal(t, UnknownService, syms.Name(recs[0].Service))
	assert.Equal(t, recs[0].Start, recs[0].End())
}

// TestExtractRuns: a batch's spans keep their order, in runs of one trace
// and one sampling class, into which a malformed span does not cut; Append
// gives every span its run's trace and class.
func TestExtractRuns(t *testing.T) {
	type span struct {
		trace     byte // 0: a malformed span, without a trace ID
		sampledAt string
	}
	type run struct {
		trace byte
		end   int32
		half  bool // sampled at one in two
	}
	tests := []struct {
		name  string
		spans []span
		want  []run
	}{
		{"one trace", []span{{1, ""}, {1, ""}, {1, ""}}, []run{{1, 3, false}}},
		{"traces one after another", []span{{1, ""}, {1, ""}, {2, ""}, {3, ""}, {3, ""}}, []run{{1, 2, false}, {2, 3, false}, {3, 5, false}}},
		{"traces interleaved", []span{{1, ""}, {2, ""}, {1, ""}}, []run{{1, 1, false}, {2, 2, false}, {1, 3, false}}},
		{"a change of sampling class", []span{{1, ""}, {1, "ot=th:8"}, {1, "ot=th:8"}, {1, ""}}, []run{{1, 1, false}, {1, 3, true}, {1, 4, false}}},
		{"a malformed span inside a run", []span{{1, ""}, {0, ""}, {1, ""}}, []run{{1, 2, false}}},
		{"nothing but malformed spans", []span{{0, ""}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			td := ptrace.NewTraces()
			spans := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
			for i, sp := range tt.spans {
				s := spans.AppendEmpty()
				if sp.trace != 0 {
					s.SetTraceID(pcommon.TraceID{15: sp.trace})
				}
				s.SetSpanID(pcommon.SpanID{7: byte(i + 1)})
				s.TraceState().FromRaw(sp.sampledAt)
			}
			ex := NewExtractor(DefaultConfig(), NewSymbols(0))
			var b Batch
			b.Spans = append(b.Spans, Span{}) // what b held before stays
			b.Runs = append(b.Runs, Run{TraceID: pcommon.TraceID{15: 9}, End: 1})
			ex.Extract(&b, td)
			half := SamplingOf("ot=th:8", pcommon.TraceID{15: 1}, 0)
			var got []run
			for _, r := range b.Runs[1:] {
				require.Contains(t, []SamplingClass{SamplingNone, half}, r.Sampling)
				got = append(got, run{r.TraceID[15], r.End - 1, r.Sampling == half})
			}
			assert.Equal(t, tt.want, got)
			var wantIDs []byte
			for i, sp := range tt.spans {
				if sp.trace != 0 {
					wantIDs = append(wantIDs, byte(i+1))
				}
			}
			var gotIDs []byte
			for _, s := range b.Spans[1:] {
				gotIDs = append(gotIDs, s.SpanID[7])
			}
			assert.Equal(t, wantIDs, gotIDs, "every span, in the batch's order")

			recs := ex.Append(nil, td)
			require.Len(t, recs, len(wantIDs))
			i := 0
			for _, r := range got {
				for ; int32(i) < r.end; i++ {
					assert.Equal(t, pcommon.TraceID{15: r.trace}, recs[i].TraceID)
					assert.Equal(t, r.half, recs[i].Sampling == half)
				}
			}
		})
	}
}

func TestSymbolsOverflow(t *testing.T) {
	s := NewSymbols(2)
	a, b := s.Intern("a"), s.Intern("b")
	assert.NotEqual(t, a, b)
	assert.Equal(t, OverflowName, s.Name(s.Intern("c")))
	assert.Equal(t, a, s.Intern("a"))
	assert.EqualValues(t, 1, s.Overflowed())
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"defaults", func(*Config) {}, ""},
		{"bad gRPC code", func(c *Config) { c.Classification.GRPCErrorCodes = []string{"UNAVAILABEL"} }, `"UNAVAILABEL" is not a gRPC status code name`},
		{"zero samples", func(c *Config) { c.EdgeModel.MinSamples = 0 }, "edge_model.min_samples"},
		{"confidence", func(c *Config) { c.EdgeModel.Confidence = 1 }, "edge_model.confidence"},
		{"thresholds crossed", func(c *Config) { c.EdgeModel.FailOpenThreshold = 0.9 }, "must be below fail_close_threshold"},
		{"negative half-life", func(c *Config) { c.EdgeModel.HalfLife = -1 }, "edge_model.half_life"},
		{"empty attribute", func(c *Config) { c.Attributes.PeerService = []string{" "} }, "attributes.peer_service: empty attribute name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tt.mutate(&cfg)
			err := cfg.Validate()
			if tt.want == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tt.want)
		})
	}
}

// oneSpan returns traces holding one span of service svc named "op".
func oneSpan(svc string) (ptrace.Traces, ptrace.Span) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	if svc != "" {
		rs.Resource().Attributes().PutStr("service.name", svc)
	}
	s := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	s.SetTraceID(pcommon.TraceID{1})
	s.SetSpanID(pcommon.SpanID{1})
	s.SetName("op")
	return td, s
}

// TestLookupSwitchMatchesMap keeps the hot-path switch and the map built
// for overridden names in step: with the default names both say the same.
func TestLookupSwitchMatchesMap(t *testing.T) {
	fast := NewExtractor(DefaultConfig(), NewSymbols(0))
	require.Nil(t, fast.attrs, "defaults take the switch")
	cfg := DefaultConfig() // the defaults and one more name: the map
	cfg.Attributes.RetryAttempt = append(slices.Clone(cfg.Attributes.RetryAttempt), "x.try")
	slow := NewExtractor(cfg, NewSymbols(0))
	require.NotNil(t, slow.attrs)
	for name, spec := range slow.attrs {
		if name != "x.try" {
			assert.Equal(t, spec, fast.lookup(name), name)
		}
	}
	assert.Equal(t, attrSpec{}, fast.lookup("db.query.text"))
}

// TestExtractLegacyNames: spans captured before v0.1.0 carry the ownership
// attributes under their old names. They are read where the current name
// is absent, the current name wins where both are there, and every span
// that carried an old name is counted.
func TestExtractLegacyNames(t *testing.T) {
	tests := []struct {
		name          string
		kind          ptrace.SpanKind
		attrs         map[string]any
		cfg           func(*Config)
		claim         ownership.Claim
		claimReceived ownership.Claim
		decision      ownership.RetryDecision
		attempt       int8
		legacy        uint64
	}{
		{name: "current names", kind: ptrace.SpanKindClient,
			attrs:         map[string]any{ownership.AttrClaimReceived: "unclaimed", ownership.AttrRetryDecision: "suppressed_unclaimed", ownership.AttrRetryAttempt: 2},
			claimReceived: ownership.ClaimUnclaimed, decision: ownership.DecisionSuppressedUnclaimed, attempt: 2},
		{name: "legacy client names", kind: ptrace.SpanKindClient,
			attrs:         map[string]any{"error.claim.received": "unclaimed", "retry.decision": "suppressed_unclaimed", "retry.attempt": 2},
			claimReceived: ownership.ClaimUnclaimed, decision: ownership.DecisionSuppressedUnclaimed, attempt: 2, legacy: 1},
		{name: "legacy server names", kind: ptrace.SpanKindServer,
			attrs: map[string]any{"error.claim": "claimed", "error.claim.reason": "own"},
			claim: ownership.ClaimClaimed, attempt: AttemptUnknown, legacy: 1},
		{name: "a legacy reason alone: the engine reads no reason", kind: ptrace.SpanKindServer,
			attrs: map[string]any{"error.claim.reason": "own"}, attempt: AttemptUnknown},
		{name: "both: the current name wins", kind: ptrace.SpanKindClient,
			attrs: map[string]any{
				ownership.AttrClaimReceived: "claimed", "error.claim.received": "unclaimed",
				ownership.AttrRetryDecision: "retried", "retry.decision": "exhausted",
				ownership.AttrRetryAttempt: 1, "retry.attempt": 3,
			},
			claimReceived: ownership.ClaimClaimed, decision: ownership.DecisionRetried, attempt: 1, legacy: 1},
		{name: "both on a server span: the current claim wins even when unreadable", kind: ptrace.SpanKindServer,
			attrs: map[string]any{ownership.AttrClaim: "garbage", "error.claim": "claimed"},
			claim: ownership.ClaimMissing, attempt: AttemptUnknown, legacy: 1},
		{name: "resend_count wins over the legacy attempt", kind: ptrace.SpanKindClient,
			attrs:   map[string]any{"http.request.resend_count": 1, "retry.attempt": 4},
			attempt: 1, legacy: 1},
		{name: "legacy attempt sent as a string", kind: ptrace.SpanKindClient,
			attrs: map[string]any{"retry.attempt": "2"}, attempt: 2, legacy: 1},
		{name: "legacy names with overridden peer names", kind: ptrace.SpanKindClient,
			cfg:           func(c *Config) { c.Attributes.PeerService = []string{"x.peer"} },
			attrs:         map[string]any{"error.claim.received": "unclaimed", "retry.attempt": 1},
			claimReceived: ownership.ClaimUnclaimed, attempt: 1, legacy: 1},
		{name: "configured attempt names leave the legacy one out", kind: ptrace.SpanKindClient,
			cfg:   func(c *Config) { c.Attributes.RetryAttempt = []string{"x.try"} },
			attrs: map[string]any{"retry.attempt": 1}, attempt: AttemptUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			require.NoError(t, cfg.Validate())
			td, s := oneSpan("svc")
			s.SetKind(tt.kind)
			require.NoError(t, s.Attributes().FromRaw(tt.attrs))
			ex := NewExtractor(cfg, NewSymbols(0))
			recs := ex.Append(nil, td)
			require.Len(t, recs, 1)
			r := recs[0]
			assert.Equal(t, tt.claim, r.Claim(), "claim")
			assert.Equal(t, tt.claimReceived, r.ClaimReceived(), "claim received")
			assert.Equal(t, tt.decision, r.Decision(), "decision")
			assert.Equal(t, tt.attempt, r.Attempt, "attempt")
			assert.Equal(t, tt.legacy, ex.Legacy, "spans counted as legacy")
		})
	}
}
