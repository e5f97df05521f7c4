// SPDX-License-Identifier: Apache-2.0

package dependencyanalysis

import (
	"slices"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/errorownership/errorownership/ownership"
)

// UnknownService is the service of spans whose resource has no service.name,
// as the OpenTelemetry SDKs spell it.
const UnknownService = "unknown_service"

// attrField says what an attribute means to the extractor.
type attrField uint8

const (
	fieldNone attrField = iota
	fieldPeerService
	fieldSampleRate
	fieldAttempt
	fieldHTTPStatus
	fieldGRPCStatus
	fieldErrorType
	fieldClaim
	fieldClaimReceived
	fieldDecision
	fieldURLTemplate
	fieldHTTPMethod
	fieldRPCService
	fieldRPCMethod
	fieldPeerAddress
	fieldPeerPort
	fieldURLFull
	fieldURLPath
	// The names before v0.1.0 (legacy_attrs.go): read where the current
	// name is absent, and counted.
	fieldLegacyClaim
	fieldLegacyClaimReceived
	fieldLegacyDecision
	fieldLegacyAttempt
)

// maxPeerServiceNames bounds attributes.peer_service.
const maxPeerServiceNames = 8

// attrSpec is one attribute the extractor reads; rank orders alternatives.
type attrSpec struct {
	field attrField
	rank  uint8
}

// Extractor turns ptrace.Traces into Span records. It is not safe for
// concurrent use: give each goroutine its own, sharing one Symbols table.
type Extractor struct {
	attrs       map[string]attrSpec
	faultCodes  [len(grpcCodes)]bool
	clientErrs  bool
	timeoutErrs []string
	syms        symbolCache
	sampling    map[samplingKey]SamplingClass
	unknownSvc  Symbol
	buf         []byte
	batch       Batch // Append's

	// Malformed counts spans skipped for a zero trace or span ID.
	Malformed uint64
	// Legacy counts spans that carried an attribute under its name before
	// v0.1.0 (error.claim, error.claim.received, retry.decision,
	// retry.attempt): captures, or services with hooks from before the
	// rename.
	Legacy uint64
}

// NewExtractor returns an extractor for cfg, interning names into syms.
// cfg must be valid (Config.Validate).
func NewExtractor(cfg Config, syms *Symbols) *Extractor {
	def := DefaultConfig()
	e := &Extractor{
		attrs:      make(map[string]attrSpec, 24),
		clientErrs: cfg.Classification.HTTPClientErrors,
		syms:       newSymbolCache(syms),
		sampling:   make(map[samplingKey]SamplingClass, 4),
	}
	e.unknownSvc = syms.Intern(UnknownService)
	add := func(f attrField, names ...string) {
		if e.attrs == nil {
			return
		}
		for i, n := range names {
			if _, taken := e.attrs[n]; !taken {
				e.attrs[n] = attrSpec{field: f, rank: uint8(i)}
			}
		}
	}
	peer := orDefault(cfg.Attributes.PeerService, def.Attributes.PeerService)
	if len(peer) > maxPeerServiceNames {
		peer = peer[:maxPeerServiceNames]
	}
	attempt := orDefault(cfg.Attributes.RetryAttempt, def.Attributes.RetryAttempt)
	if slices.Equal(peer, def.Attributes.PeerService) && slices.Equal(attempt, def.Attributes.RetryAttempt) && len(cfg.Attributes.SampleRate) == 0 {
		e.attrs = nil // the default names: lookup's switch knows them
	}
	add(fieldPeerService, peer...)
	add(fieldAttempt, attempt...)
	add(fieldSampleRate, cfg.Attributes.SampleRate...)
	add(fieldHTTPStatus, string(semconv.HTTPResponseStatusCodeKey), "http.status_code")
	add(fieldGRPCStatus, "rpc.grpc.status_code", string(semconv.RPCResponseStatusCodeKey), "rpc.status_code")
	add(fieldErrorType, string(semconv.ErrorTypeKey))
	add(fieldClaim, ownership.AttrClaim)
	add(fieldClaimReceived, ownership.AttrClaimReceived)
	add(fieldDecision, ownership.AttrRetryDecision)
	add(fieldURLTemplate, string(semconv.URLTemplateKey), string(semconv.HTTPRouteKey))
	add(fieldHTTPMethod, string(semconv.HTTPRequestMethodKey), "http.method")
	add(fieldRPCService, "rpc.service")
	add(fieldRPCMethod, string(semconv.RPCMethodKey))
	add(fieldPeerAddress, string(semconv.ServerAddressKey), "net.peer.name")
	add(fieldPeerPort, string(semconv.ServerPortKey), "net.peer.port")
	add(fieldURLFull, string(semconv.URLFullKey), "http.url")
	add(fieldURLPath, string(semconv.URLPathKey))
	add(fieldLegacyClaim, legacyAttrClaim)
	add(fieldLegacyClaimReceived, legacyAttrClaimReceived)
	add(fieldLegacyDecision, legacyAttrRetryDecision)
	if slices.Equal(attempt, def.Attributes.RetryAttempt) {
		// The old name is part of the default, not of names a
		// configuration chose.
		add(fieldLegacyAttempt, legacyAttrRetryAttempt)
	}

	codes := cfg.Classification.GRPCErrorCodes
	if codes == nil {
		codes = def.Classification.GRPCErrorCodes
	}
	for _, name := range codes {
		if c, ok := grpcCodeByName(name); ok {
			e.faultCodes[c] = true
		}
	}
	for _, t := range cfg.Classification.TimeoutErrorTypes {
		e.timeoutErrs = append(e.timeoutErrs, strings.ToLower(t))
	}
	return e
}

func orDefault(names, def []string) []string {
	if len(names) == 0 {
		return def
	}
	return names
}

// lookup says what attribute k means. The default names are a switch,
// which is several times faster than a map on the span hot path; a
// configuration that overrides names uses the map built from it.
func (e *Extractor) lookup(k string) attrSpec {
	if e.attrs != nil {
		return e.attrs[k]
	}
	// Current names come from the semantic conventions package; the older
	// spellings still sent by many SDKs (peer.service, http.status_code,
	// http.method, http.url, net.peer.name, net.peer.port,
	// rpc.grpc.status_code, rpc.status_code, rpc.service) are no longer in
	// it and are written out.
	switch k {
	case string(semconv.ServicePeerNameKey):
		return attrSpec{fieldPeerService, 0}
	case "peer.service":
		return attrSpec{fieldPeerService, 1}
	case string(semconv.MessagingDestinationNameKey):
		return attrSpec{fieldPeerService, 2}
	case string(semconv.ServerAddressKey):
		return attrSpec{fieldPeerAddress, 0}
	case "net.peer.name":
		return attrSpec{fieldPeerAddress, 1}
	case string(semconv.ServerPortKey):
		return attrSpec{fieldPeerPort, 0}
	case "net.peer.port":
		return attrSpec{fieldPeerPort, 1}
	case string(semconv.URLFullKey):
		return attrSpec{fieldURLFull, 0}
	case "http.url":
		return attrSpec{fieldURLFull, 1}
	case string(semconv.URLPathKey):
		return attrSpec{fieldURLPath, 0}
	case string(semconv.HTTPRequestResendCountKey):
		return attrSpec{fieldAttempt, 0}
	case ownership.AttrRetryAttempt:
		return attrSpec{fieldAttempt, 1}
	case string(semconv.HTTPResponseStatusCodeKey):
		return attrSpec{fieldHTTPStatus, 0}
	case "http.status_code":
		return attrSpec{fieldHTTPStatus, 1}
	case "rpc.grpc.status_code":
		return attrSpec{fieldGRPCStatus, 0}
	case string(semconv.RPCResponseStatusCodeKey):
		return attrSpec{fieldGRPCStatus, 1}
	case "rpc.status_code":
		return attrSpec{fieldGRPCStatus, 2}
	case string(semconv.ErrorTypeKey):
		return attrSpec{fieldErrorType, 0}
	case ownership.AttrClaim:
		return attrSpec{fieldClaim, 0}
	case ownership.AttrClaimReceived:
		return attrSpec{fieldClaimReceived, 0}
	case ownership.AttrRetryDecision:
		return attrSpec{fieldDecision, 0}
	case legacyAttrClaim:
		return attrSpec{fieldLegacyClaim, 0}
	case legacyAttrClaimReceived:
		return attrSpec{fieldLegacyClaimReceived, 0}
	case legacyAttrRetryDecision:
		return attrSpec{fieldLegacyDecision, 0}
	case legacyAttrRetryAttempt:
		return attrSpec{fieldLegacyAttempt, 0}
	case string(semconv.URLTemplateKey):
		return attrSpec{fieldURLTemplate, 0}
	case string(semconv.HTTPRouteKey):
		return attrSpec{fieldURLTemplate, 1}
	case string(semconv.HTTPRequestMethodKey):
		return attrSpec{fieldHTTPMethod, 0}
	case "http.method":
		return attrSpec{fieldHTTPMethod, 1}
	case "rpc.service":
		return attrSpec{fieldRPCService, 0}
	case string(semconv.RPCMethodKey):
		return attrSpec{fieldRPCMethod, 0}
	}
	return attrSpec{}
}

// Extract reads every span of td into b, after what b holds. Spans with
// a zero trace or span ID are counted in Malformed and skipped.
func (e *Extractor) Extract(b *Batch, td ptrace.Traces) {
	if e.syms.fresh() {
		e.unknownSvc = e.syms.intern(UnknownService)
	}
	// Sized once: SpanCount reads only the slices' lengths, and growing by
	// append copies a batch of 100,000 spans several times over.
	b.Spans = slices.Grow(b.Spans, td.SpanCount())
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		svc := e.unknownSvc
		if v, ok := rs.Resource().Attributes().Get(string(semconv.ServiceNameKey)); ok && v.Str() != "" {
			svc = e.syms.intern(v.Str())
		}
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				sp := spans.At(k)
				tid, sid := sp.TraceID(), sp.SpanID()
				if tid.IsEmpty() || sid.IsEmpty() {
					e.Malformed++
					continue
				}
				b.Spans = append(b.Spans, Span{SpanID: sid})
				rate := e.fill(&b.Spans[len(b.Spans)-1], sp, svc)
				c := SamplingNone
				if ts := sp.TraceState().AsRaw(); ts != "" || rate != 0 {
					c = e.samplingClass(samplingOf(ts, tid, rate))
				}
				b.ended(tid, c)
			}
		}
	}
}

// Append extracts a record for every span of td and appends them to dst:
// Extract for callers that want each span beside its trace ID, such as
// ForEachTrace's.
func (e *Extractor) Append(dst []Record, td ptrace.Traces) []Record {
	e.batch.Reset()
	e.Extract(&e.batch, td)
	dst = e.batch.AppendRecords(slices.Grow(dst, len(e.batch.Spans)))
	if cap(e.batch.Spans) > 1<<16 {
		e.batch = Batch{} // a big batch's room is not kept
	}
	return dst
}

// spanAttrs collects what one span's attributes say before it is classified.
type spanAttrs struct {
	peer        string
	peerRank    uint8
	httpStatus  int64
	grpcCode    int
	attempt     int64
	attemptRank uint8
	errorType   string
	template    string
	method      string
	rpcService  string
	rpcMethod   string
	address     string
	addressRank uint8
	port        int64
	url         string
	urlRank     uint8
	path        string
	sampleRate  float64
	sampleRank  uint8
	// seen marks the ownership attributes present under their current
	// names; legacy, those present under their old ones.
	seen   uint8
	legacy uint8
	old    legacyValues
}

// The bits of spanAttrs.seen and spanAttrs.legacy.
const (
	seenClaim uint8 = 1 << iota
	seenClaimReceived
	seenDecision
	seenAttempt
)

// legacyValues are what a span's legacy attributes said, applied once its
// attributes are read, only where no current name said otherwise.
type legacyValues struct {
	claim, claimReceived ownership.Claim
	decision             ownership.RetryDecision
	attempt              int64
}

// fill fills r from sp and returns the value of the sample-rate attribute,
// 0 if none.
func (e *Extractor) fill(r *Span, sp ptrace.Span, svc Symbol) float64 {
	r.ParentID = sp.ParentSpanID()
	r.Start = sp.StartTimestamp()
	r.SetEnd(sp.EndTimestamp())
	r.Service = svc
	r.Attempt = AttemptUnknown
	r.Kind = kindOf(sp.Kind())
	if !r.Kind.Outbound() {
		r.Operation = e.syms.intern(sp.Name())
	}

	a := spanAttrs{grpcCode: -1, attempt: -1, peerRank: 255, attemptRank: 255, addressRank: 255, urlRank: 255, sampleRank: 255}
	// The loop's body is kept small enough to be inlined into pdata's
	// iterator: with the switch in it, it was a call an attribute, most of
	// which the switch ignores.
	for k, v := range sp.Attributes().All() {
		if spec := e.lookup(k); spec.field != fieldNone {
			take(r, &a, spec, v)
		}
	}
	if a.legacy != 0 {
		e.applyLegacy(r, &a)
	}
	if a.attempt >= 0 {
		r.Attempt = int8(min(a.attempt, MaxAttempt))
	}
	r.Flags = e.classify(sp.Status().Code(), &a)
	if r.Kind.Outbound() {
		r.PeerService = e.syms.intern(a.peer)
		r.PeerOperation = e.peerOperation(sp.Name(), &a)
		r.PeerAddress = e.peerAddress(&a)
		r.Target = target(&a)
	}
	return a.sampleRate
}

// take applies attribute value v, whose meaning is spec, to r and a.
func take(r *Span, a *spanAttrs, spec attrSpec, v pcommon.Value) {
	switch spec.field {
	case fieldPeerService:
		if p := v.Str(); p != "" && spec.rank <= a.peerRank {
			a.peer, a.peerRank = p, spec.rank
		}
	case fieldSampleRate:
		if f := floatValue(v); f > 0 && spec.rank < a.sampleRank {
			a.sampleRate, a.sampleRank = f, spec.rank
		}
	case fieldAttempt:
		if n, ok := intValue(v); ok && n >= 0 && spec.rank < a.attemptRank {
			a.attempt, a.attemptRank = n, spec.rank
		}
	case fieldHTTPStatus:
		if n, ok := intValue(v); ok {
			a.httpStatus = n
		}
	case fieldGRPCStatus:
		a.grpcCode = grpcCodeOf(v)
	case fieldErrorType:
		a.errorType = v.Str()
	case fieldClaim:
		r.SetClaim(ownership.ParseClaim(v.Str()))
		a.seen |= seenClaim
	case fieldClaimReceived:
		r.SetClaimReceived(ownership.ParseClaim(v.Str()))
		a.seen |= seenClaimReceived
	case fieldDecision:
		r.SetDecision(ownership.ParseRetryDecision(v.Str()))
		a.seen |= seenDecision
	case fieldLegacyClaim:
		a.old.claim, a.legacy = ownership.ParseClaim(v.Str()), a.legacy|seenClaim
	case fieldLegacyClaimReceived:
		a.old.claimReceived, a.legacy = ownership.ParseClaim(v.Str()), a.legacy|seenClaimReceived
	case fieldLegacyDecision:
		a.old.decision, a.legacy = ownership.ParseRetryDecision(v.Str()), a.legacy|seenDecision
	case fieldLegacyAttempt:
		if n, ok := intValue(v); ok && n >= 0 {
			a.old.attempt, a.legacy = n, a.legacy|seenAttempt
		}
	case fieldURLTemplate:
		if spec.rank == 0 || a.template == "" {
			a.template = v.Str()
		}
	case fieldHTTPMethod:
		a.method = v.Str()
	case fieldRPCService:
		a.rpcService = v.Str()
	case fieldRPCMethod:
		a.rpcMethod = v.Str()
	case fieldPeerAddress:
		if spec.rank < a.addressRank {
			a.address, a.addressRank = v.Str(), spec.rank
		}
	case fieldPeerPort:
		if n, ok := intValue(v); ok && n > 0 && n < 1<<16 {
			a.port = n
		}
	case fieldURLFull:
		if spec.rank < a.urlRank {
			a.url, a.urlRank = v.Str(), spec.rank
		}
	case fieldURLPath:
		a.path = v.Str()
	}
}

// samplingClass interns k through the extractor's own cache, which a
// fleet's few sampling settings fill at once.
func (e *Extractor) samplingClass(k samplingKey) SamplingClass {
	if k.inconsistent {
		return SamplingInconsistent
	}
	c, ok := e.sampling[k]
	if !ok {
		c = internSampling(k)
		if len(e.sampling) < 1024 {
			e.sampling[k] = c
		}
	}
	return c
}

// floatValue reads a number attribute, also when sent as a string; 0 if
// it is none.
func floatValue(v pcommon.Value) float64 {
	switch v.Type() {
	case pcommon.ValueTypeInt:
		return float64(v.Int())
	case pcommon.ValueTypeDouble:
		return v.Double()
	case pcommon.ValueTypeStr:
		f, err := strconv.ParseFloat(v.Str(), 64)
		if err == nil {
			return f
		}
	}
	return 0
}

// applyLegacy takes what the span said under the names before v0.1.0,
// where it said nothing under the current ones, and counts the span. It is
// off the hot path: spans written since the rename never reach it.
func (e *Extractor) applyLegacy(r *Span, a *spanAttrs) {
	e.Legacy++
	take := a.legacy &^ a.seen
	if take&seenClaim != 0 {
		r.SetClaim(a.old.claim)
	}
	if take&seenClaimReceived != 0 {
		r.SetClaimReceived(a.old.claimReceived)
	}
	if take&seenDecision != 0 {
		r.SetDecision(a.old.decision)
	}
	if a.legacy&seenAttempt != 0 && a.attempt < 0 {
		a.attempt = a.old.attempt
	}
}

// classify applies docs/design.md §4.1: an HTTP status decides when present, else a
// gRPC code, else the span status.
func (e *Extractor) classify(status ptrace.StatusCode, a *spanAttrs) uint8 {
	var failed, timeout, answered bool
	var server uint8 // FlagAnswered when a server's answer is recorded
	switch {
	case a.httpStatus > 0:
		failed = a.httpStatus >= 500 || (e.clientErrs && a.httpStatus >= 400)
		timeout = a.httpStatus == 504 || a.httpStatus == 408
		answered = true
		server = FlagAnswered
	case a.grpcCode >= 0:
		failed = e.faultCodes[a.grpcCode]
		timeout = a.grpcCode == grpcDeadlineExceeded
		answered = a.grpcCode != grpcCancelled
		if answered && !timeout && a.grpcCode != grpcUnavailable {
			server = FlagAnswered
		}
	default:
		failed = status == ptrace.StatusCodeError
		answered = !failed
	}
	if !failed {
		if answered {
			return FlagCompleted | server
		}
		return 0
	}
	if !timeout && a.errorType != "" {
		timeout = e.isTimeoutType(a.errorType)
	}
	if timeout {
		return FlagFailed | FlagTimeout | server
	}
	return FlagFailed | server
}

func (e *Extractor) isTimeoutType(t string) bool {
	if containsFold(t, "timeout") || containsFold(t, "deadline") {
		return true
	}
	for _, want := range e.timeoutErrs {
		if strings.EqualFold(t, want) {
			return true
		}
	}
	return false
}

// peerOperation names the callee's operation the way its server span is
// named by convention: "METHOD template" for HTTP, "service/method" for RPC,
// else the client span's own name.
func (e *Extractor) peerOperation(name string, a *spanAttrs) Symbol {
	switch {
	case a.template != "":
		e.buf = e.buf[:0]
		if a.method != "" {
			e.buf = append(append(e.buf, a.method...), ' ')
		}
		e.buf = append(e.buf, a.template...)
		return e.syms.internBytes(e.buf)
	case a.rpcService != "" && a.rpcMethod != "":
		e.buf = append(append(append(e.buf[:0], a.rpcService...), '/'), a.rpcMethod...)
		return e.syms.internBytes(e.buf)
	}
	return e.syms.intern(name)
}

// peerAddress names where the call went as "host:port", or "host" when
// the instrumentation left out the port (as it does for a scheme's default).
// Where the span names no server.address or net.peer.name — the old HTTP
// conventions of Python's requests, urllib3 and httpx write only http.url —
// the host and port come from the URL, which is what a hook names the
// callee by: without it the hints would carry no address for such a
// caller, and its hooks would find every edge unknown.
func (e *Extractor) peerAddress(a *spanAttrs) Symbol {
	if a.address == "" && a.url != "" {
		host, port := urlHostPort(a.url)
		if host == "" {
			return NoSymbol
		}
		a.address = host
		if port != 0 {
			a.port = port
		}
	}
	if a.address == "" {
		return NoSymbol
	}
	if a.port == 0 {
		return e.syms.intern(a.address)
	}
	e.buf = e.buf[:0]
	ipv6 := strings.IndexByte(a.address, ':') >= 0
	if ipv6 {
		e.buf = append(e.buf, '[')
	}
	e.buf = append(e.buf, a.address...)
	if ipv6 {
		e.buf = append(e.buf, ']')
	}
	e.buf = strconv.AppendInt(append(e.buf, ':'), a.port, 10)
	return e.syms.internBytes(e.buf)
}

// target hashes the method and URL path of an HTTP call (FNV-1a), which
// tell apart a caller's requests to one callee: GET /items/1 and GET
// /items/2 are two logical calls, where the callee names both GET
// /items/{id}. It is 0 when the span has no URL.
func target(a *spanAttrs) uint32 {
	path := a.path
	if path == "" && a.url != "" {
		path = urlPath(a.url)
	}
	if path == "" {
		return 0
	}
	const offset, prime = 2166136261, 16777619
	h := uint32(offset)
	for i := 0; i < len(a.method); i++ {
		h = (h ^ uint32(a.method[i])) * prime
	}
	h = (h ^ ' ') * prime
	for i := 0; i < len(path); i++ {
		h = (h ^ uint32(path[i])) * prime
	}
	return h | 1 // never 0, which means "no URL"
}

// urlPath returns the path of an absolute URL without its query and
// fragment, without parsing the rest: "/" when it has none.
func urlPath(u string) string {
	if i := strings.Index(u, "://"); i >= 0 {
		u = u[i+3:]
		slash := strings.IndexByte(u, '/')
		if slash < 0 {
			return "/"
		}
		u = u[slash:]
	}
	if i := strings.IndexAny(u, "?#"); i >= 0 {
		u = u[:i]
	}
	if u == "" {
		return "/"
	}
	return u
}

// urlHostPort returns the host of an absolute URL, without brackets for
// an IPv6 literal, and its port, 0 when the URL gives none. host is ""
// when u is not an absolute URL with a host.
func urlHostPort(u string) (host string, port int64) {
	i := strings.Index(u, "://")
	if i < 0 {
		return "", 0
	}
	u = u[i+3:]
	if j := strings.IndexAny(u, "/?#"); j >= 0 {
		u = u[:j]
	}
	if j := strings.LastIndexByte(u, '@'); j >= 0 {
		u = u[j+1:] // user information, never part of the address
	}
	if strings.HasPrefix(u, "[") {
		end := strings.IndexByte(u, ']')
		if end < 0 {
			return "", 0
		}
		host, u = u[1:end], u[end+1:]
	} else if j := strings.IndexByte(u, ':'); j >= 0 {
		host, u = u[:j], u[j:]
	} else {
		host, u = u, ""
	}
	if p, ok := strings.CutPrefix(u, ":"); ok {
		if n, err := strconv.ParseInt(p, 10, 32); err == nil && n > 0 && n < 1<<16 {
			port = n
		}
	}
	return host, port
}

func kindOf(k ptrace.SpanKind) Kind {
	switch k {
	case ptrace.SpanKindServer:
		return KindServer
	case ptrace.SpanKindClient:
		return KindClient
	case ptrace.SpanKindProducer:
		return KindProducer
	case ptrace.SpanKindConsumer:
		return KindConsumer
	}
	return KindInternal
}

// intValue reads an integer attribute, also when it was sent as a string.
func intValue(v pcommon.Value) (int64, bool) {
	switch v.Type() {
	case pcommon.ValueTypeInt:
		return v.Int(), true
	case pcommon.ValueTypeDouble:
		return int64(v.Double()), true
	case pcommon.ValueTypeStr:
		n, err := strconv.ParseInt(v.Str(), 10, 64)
		return n, err == nil
	}
	return 0, false
}

// grpcCodeOf reads a gRPC status code given as a number or as a name
// ("UNAVAILABLE", as rpc.response.status_code spells it); -1 if neither.
func grpcCodeOf(v pcommon.Value) int {
	if n, ok := intValue(v); ok {
		if n >= 0 && int(n) < len(grpcCodes) {
			return int(n)
		}
		return -1
	}
	if v.Type() == pcommon.ValueTypeStr {
		if c, ok := grpcCodeByName(v.Str()); ok {
			return c
		}
	}
	return -1
}

// containsFold reports whether s contains the lower-case ASCII word sub,
// ignoring case, without allocating.
func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}
