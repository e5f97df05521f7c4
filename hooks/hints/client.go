// SPDX-License-Identifier: Apache-2.0

package hints

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/errorownership/errorownership/hooks"
	"github.com/errorownership/errorownership/ownership"
)

// Polling limits.
const (
	// DefaultTTL is the polling interval when neither Cache-Control nor
	// ttl_seconds gives one.
	DefaultTTL = 30 * time.Second
	// DefaultMaxStale is how long the last good hints are used after the
	// collector stopped confirming them; then the safe defaults apply.
	DefaultMaxStale = 5 * time.Minute
	minPoll         = time.Second
	maxPoll         = 10 * time.Minute
	maxErrorBackoff = time.Minute
	maxBody         = 1 << 20
	// maxETag is the longest ETag the Client keeps to revalidate with; a
	// longer one is not kept, and the next fetch asks for the whole
	// document.
	maxETag = 1 << 10
	// DefaultFetchTimeout bounds each fetch, reading the body included,
	// whatever the HTTP client: a collector that answers slowly, or
	// trickles its body, costs a poll, never a stuck poller.
	DefaultFetchTimeout = 5 * time.Second
)

// A Client polls a collector for one service's hints and answers the hooks
// from the last good ones (it implements hooks.HintSource). It revalidates
// with If-None-Match, polls again after the response's Cache-Control max-age
// or else the body's ttl_seconds, and keeps the last good hints when the
// collector is unreachable or answers garbage — for up to the max staleness
// (DefaultMaxStale), after which, and before the first answer, it gives the
// safe defaults: no fail-open knowledge (every edge unknown, so fail-close)
// and hooks.DefaultLimits.
//
// Garbage is anything but a 200 with a valid document for the service, of
// at most 1 MiB, read within the fetch timeout (DefaultFetchTimeout):
// another status (a 304 only answers an If-None-Match the Client sent),
// invalid JSON, another version or service, a negative TTL, a retry budget
// out of range (ownership.RetryBudget.Validate: a floor over
// ownership.MaxMinRetriesPerSecond is refused). Each failure
// backs the next fetch off, from 1 s to a minute. A TTL or max-age is held
// within [1 s, 10 min]; an ETag over 1 KiB is not kept.
//
// Its methods are safe for concurrent use; Mode and BudgetLimits never
// wait on a fetch: they read the last good state with one atomic load, and
// Mode then scans the edges to the peer without allocating.
type Client struct {
	url string
	// shown is url as errors name it, without a password it may hold.
	shown    string
	service  string
	http     *http.Client
	header   http.Header
	now      func() time.Time
	maxStale time.Duration
	timeout  time.Duration // per fetch

	state atomic.Pointer[state]

	mu       sync.Mutex // serialises Refresh
	etag     string
	failures int
}

var _ hooks.HintSource = (*Client)(nil)

// state is one good answer, immutable once stored.
type state struct {
	hints   *ownership.Hints
	index   index
	limits  hooks.Limits
	checked time.Time // when the collector last confirmed these hints
}

// An Option configures a Client.
type Option func(*Client)

// WithHTTPClient makes the Client fetch with hc (default: a client with a
// 5 s timeout and a transport of its own): a collector serving hints over
// TLS with a certificate of a private CA needs one whose Transport trusts
// it (TLSClientConfig.RootCAs). Whatever hc's timeout, a fetch also ends
// after the fetch timeout (WithFetchTimeout). Give it a transport without
// otelhttp: a traced poll is a trace of its own, which the analysis counts
// as the service's.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithHeader makes the Client send the header name: value with every
// request, such as the credentials the collector's authenticator for the
// hints endpoint expects — for the bearertokenauth extension,
// WithHeader("Authorization", "Bearer "+token). For credentials that
// change while the service runs (a token file that is rotated), give
// WithHTTPClient a client whose Transport sets them on each request.
func WithHeader(name, value string) Option {
	return func(c *Client) {
		if c.header == nil {
			c.header = http.Header{}
		}
		c.header.Add(name, value)
	}
}

// WithFetchTimeout bounds each fetch, from the request to the end of the
// body (default DefaultFetchTimeout). A fetch that runs out of time is a
// failure: the last good hints stay, and the next fetch backs off.
func WithFetchTimeout(d time.Duration) Option { return func(c *Client) { c.timeout = d } }

// WithClock makes the Client read time from now, for tests.
func WithClock(now func() time.Time) Option { return func(c *Client) { c.now = now } }

// WithMaxStale sets how long the last good hints outlive the collector's
// silence (default DefaultMaxStale).
func WithMaxStale(d time.Duration) Option { return func(c *Client) { c.maxStale = d } }

// newTransport returns a transport with http.DefaultTransport's settings
// that is not http.DefaultTransport: a service that traces every call by
// setting http.DefaultTransport = otelhttp.NewTransport(…) would otherwise
// trace each poll too.
func newTransport() http.RoundTripper {
	if t, ok := http.DefaultTransport.(*http.Transport); ok {
		return t.Clone()
	}
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// New returns a Client for service's hints at baseURL (e.g.
// "http://otel-collector:4320"). It does not fetch; call Run or Refresh,
// or use Start.
func New(baseURL, service string, opts ...Option) *Client {
	c := &Client{
		url:      strings.TrimSuffix(baseURL, "/") + ownership.HintsPath + "?service=" + url.QueryEscape(service),
		service:  service,
		http:     &http.Client{Timeout: 5 * time.Second, Transport: newTransport()},
		now:      time.Now,
		maxStale: DefaultMaxStale,
		timeout:  DefaultFetchTimeout,
	}
	for _, o := range opts {
		o(c)
	}
	c.shown = "(a URL that cannot be parsed)"
	if u, err := url.Parse(c.url); err == nil {
		c.shown = u.Redacted()
	}
	return c
}

// Start returns a Client and polls in the background until ctx ends.
func Start(ctx context.Context, baseURL, service string, opts ...Option) *Client {
	c := New(baseURL, service, opts...)
	go c.Run(ctx)
	return c
}

// Run polls until ctx ends: after each answer when it expires, after each
// failure with backoff from 1 s up to a minute.
func (c *Client) Run(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		next, _ := c.Refresh(ctx)
		t.Reset(next)
	}
}

// Refresh fetches the hints once and returns when to fetch them next. On
// an error the last good hints stay.
func (c *Client) Refresh(ctx context.Context) (next time.Duration, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	next, err = c.fetch(ctx)
	if err != nil {
		c.failures++
		return min(time.Second<<min(c.failures-1, 6), maxErrorBackoff), err
	}
	c.failures = 0
	return next, nil
}

func (c *Client) fetch(ctx context.Context) (time.Duration, error) {
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which may hold a password
		}
		return 0, fmt.Errorf("hints: %s: %w", c.shown, err)
	}
	for k, v := range c.header {
		req.Header[k] = v
	}
	req.Header.Set("Accept", "application/json")
	old := c.state.Load()
	revalidate := old != nil && c.etag != ""
	if revalidate {
		req.Header.Set("If-None-Match", c.etag)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()

	switch {
	case res.StatusCode == http.StatusNotModified && revalidate:
		st := *old
		st.checked = c.now()
		c.state.Store(&st)
		return pollAfter(res.Header, old.hints), nil
	case res.StatusCode != http.StatusOK:
		return 0, fmt.Errorf("hints: %s: %s", c.shown, res.Status)
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, maxBody+1))
	if err != nil {
		return 0, err
	}
	if len(body) > maxBody {
		return 0, fmt.Errorf("hints: %s: body over %d bytes", c.shown, maxBody)
	}
	h := new(ownership.Hints)
	if err := json.Unmarshal(body, h); err != nil {
		return 0, fmt.Errorf("hints: %s: %w", c.shown, err)
	}
	if err := h.Validate(c.service); err != nil {
		return 0, fmt.Errorf("hints: %s: %w", c.shown, err)
	}
	c.state.Store(&state{hints: h, index: newIndex(h.Edges), limits: h.Budget(), checked: c.now()})
	c.etag = res.Header.Get("ETag")
	if len(c.etag) > maxETag {
		c.etag = ""
	}
	return pollAfter(res.Header, h), nil
}

// pollAfter is the response's max-age, else the hints' TTL, else
// DefaultTTL, within [1 s, 10 min].
func pollAfter(hdr http.Header, h *ownership.Hints) time.Duration {
	d := DefaultTTL
	if age, ok := maxAge(hdr.Get("Cache-Control")); ok {
		d = age
	} else if h != nil && h.TTLSeconds > 0 {
		d = seconds(h.TTLSeconds)
	}
	return min(max(d, minPoll), maxPoll)
}

// seconds converts n ≥ 0 seconds to a Duration, saturating above maxPoll
// rather than overflowing: 2^63 − 1 seconds are not −1 s.
func seconds(n int) time.Duration {
	if n > int(maxPoll/time.Second) {
		return maxPoll + time.Second
	}
	return time.Duration(n) * time.Second
}

// maxAge reads max-age from a Cache-Control value.
func maxAge(cc string) (time.Duration, bool) {
	for part := range strings.SplitSeq(cc, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || !strings.EqualFold(k, "max-age") {
			continue
		}
		n, err := strconv.Atoi(strings.Trim(v, `"`))
		if err != nil || n < 0 {
			return 0, false
		}
		return seconds(n), true
	}
	return 0, false
}

// current returns the last good state if it is not too stale.
func (c *Client) current() *state {
	st := c.state.Load()
	if st == nil || c.now().Sub(st.checked) > c.maxStale {
		return nil
	}
	return st
}

// Mode returns the mode of the edge (operation → peerService,
// peerOperation), from what a hook knows at call time:
//
//   - peerService is the callee's service.name or the address the call went
//     to ("10.0.0.7:8080", "catalog.shop.svc"), which the hints list for each
//     edge (peer_addresses); an address without a port matches any port of
//     its host, and the other way round.
//   - operation and peerOperation are named as the server spans are ("GET
//     /items/{id}", "shop.Cart/Add") or as concrete requests ("GET
//     /items/42"), which match the route templates of the hints.
//   - peerOperation "" answers for every edge to the peer: fail-open only
//     if all of them are.
//
// When the hints know no edge from operation to the peer (or operation is
// ""), it asks the same question over every inbound operation. Without
// hints, or when nothing matches, it is ModeUnknown.
func (c *Client) Mode(operation, peerService, peerOperation string) ownership.Mode {
	st := c.current()
	if st == nil {
		return ownership.ModeUnknown
	}
	return st.index.mode(operation, peerService, peerOperation)
}

// BudgetLimits returns the hints' retry budget, or hooks.DefaultLimits.
func (c *Client) BudgetLimits() hooks.Limits {
	if st := c.current(); st != nil {
		return st.limits
	}
	return hooks.DefaultLimits()
}

// Hints returns the hints in use and true, or nil and false when the safe
// defaults apply. The result must not be modified.
func (c *Client) Hints() (*ownership.Hints, bool) {
	if st := c.current(); st != nil {
		return st.hints, true
	}
	return nil, false
}

// index finds the edges a hook's question is about: by the callee's name
// or address, then by the operations, matched as route templates.
type index struct {
	edges []ownership.HintEdge
	// byPeer holds, by peer service and by each full address, the edges
	// to that peer; portless those whose address has no port, by host;
	// ported those whose address has a port, by host.
	byPeer, portless, ported map[string][]int32
}

func newIndex(edges []ownership.HintEdge) index {
	ix := index{edges: edges, byPeer: map[string][]int32{}, portless: map[string][]int32{}, ported: map[string][]int32{}}
	for i, e := range edges {
		n := int32(i)
		add(ix.byPeer, e.PeerService, n)
		for _, a := range e.PeerAddresses {
			if a == e.PeerService {
				continue
			}
			add(ix.byPeer, a, n)
			if host, ok := splitPort(a); ok {
				add(ix.ported, host, n)
			} else {
				add(ix.portless, a, n)
			}
		}
	}
	return ix
}

// add lists edge n under key k, once: edges are added in order, so an
// edge found again under the same key (a repeated address, two ports of
// one host) is the last one listed.
func add(m map[string][]int32, k string, n int32) {
	l := m[k]
	if len(l) > 0 && l[len(l)-1] == n {
		return
	}
	m[k] = append(l, n)
}

// splitPort returns the host of "host:port" ("[v6]:port") and true, or
// the address itself and false when it has no port.
func splitPort(addr string) (string, bool) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return addr, false
	}
	return host, true
}

func (ix *index) mode(operation, peer, peerOperation string) ownership.Mode {
	cands := ix.byPeer[peer]
	if len(cands) == 0 {
		if host, ok := splitPort(peer); ok {
			cands = ix.portless[host]
		} else {
			cands = ix.ported[peer]
		}
	}
	// The edges of operation, if the hints know any; else every edge to
	// the peer.
	mine := false
	if operation != "" {
		for _, i := range cands {
			if matchOperation(ix.edges[i].Operation, operation) {
				mine = true
				break
			}
		}
	}
	var t tally
	for _, i := range cands {
		e := &ix.edges[i]
		if mine && !matchOperation(e.Operation, operation) ||
			peerOperation != "" && !matchOperation(e.PeerOperation, peerOperation) {
			continue
		}
		switch e.Mode {
		case ownership.ModeFailOpen:
			t.open++
		case ownership.ModeFailClose:
			t.close++
		default:
			t.unknown++
		}
	}
	return t.mode()
}

// tally counts the modes of the edges a question covers.
type tally struct{ open, close, unknown int }

func (t tally) mode() ownership.Mode {
	switch {
	case t.close > 0:
		return ownership.ModeFailClose
	case t.open > 0 && t.unknown == 0:
		return ownership.ModeFailOpen
	}
	return ownership.ModeUnknown
}

// matchOperation reports whether op names a request of the operation
// pattern, as a server span names it: equal, or "METHOD /path" matching a
// route template in the manner of net/http.ServeMux patterns — {name}
// matches one path segment, {name...} the rest of the path, {$} only the
// end, and a pattern ending in "/" every path below it — and of the route
// templates other frameworks' instrumentations put in http.route (see
// segmentKind). A pattern without a method matches any method; one whose
// path lacks its leading "/" (Django's, ASP.NET's) is read as if it had it.
func matchOperation(pattern, op string) bool {
	if pattern == op {
		return true
	}
	pm, pp, ok := strings.Cut(pattern, " ")
	if !ok {
		pm, pp = "", pattern
	}
	om, opath, ok := strings.Cut(op, " ")
	if !ok {
		om, opath = "", op
	}
	if pm != "" && pm != om {
		return false
	}
	if i := strings.IndexAny(opath, "?#"); i >= 0 {
		opath = opath[:i]
	}
	if !strings.HasPrefix(opath, "/") || pp == "" {
		return false
	}
	return matchPath(strings.TrimPrefix(pp, "/"), opath[1:])
}

// matchPath matches a path against a route template, both without their
// leading "/", a segment at a time and without allocating: the hooks ask
// on the failure path of requests, over as many edges as a hints document
// holds.
func matchPath(pattern, path string) bool {
	more := true // path has a segment left
	for {
		seg, prest, pmore := strings.Cut(pattern, "/")
		kind := segmentKind(seg)
		switch {
		case !pmore && seg == "": // "…/": the subtree below
			return more
		case kind == segEnd:
			return more && path == ""
		case !more:
			return false
		case kind == segRest:
			return true
		}
		qseg, qrest, qmore := strings.Cut(path, "/")
		switch {
		case kind == segOne:
			if qseg == "" {
				return false
			}
		case seg != qseg:
			return false
		}
		if !pmore {
			return !qmore
		}
		pattern, path, more = prest, qrest, qmore
	}
}

// The kinds of route template segment.
const (
	segLiteral = iota // matches itself
	segOne            // a parameter: any one non-empty segment
	segRest           // a wildcard: the rest of the path, empty or not
	segEnd            // {$}: the end of the path
)

// segmentKind reads a route template segment as the frameworks spell it:
//   - {id}, {id:[0-9]+} (gorilla/mux), {id:int} (ASP.NET), {id} (chi,
//     Spring, FastAPI): one segment; {path...} (net/http), {path:path}
//     (Starlette, FastAPI), {*slug} (ASP.NET), {**slug}: the rest;
//   - :id (Express, Koa, gin, echo, Rails), :id(.:format) (Rails), :id?
//     and :id(\d+) (Express): one segment; *, *path (gin, echo, Express,
//     Rails globs): the rest;
//
// A wildcard, as {path...} in net/http, needs its segment to be there,
// empty or not: "/files/*" matches "/files/" but not "/files".
//   - <id>, <int:id> (Flask, Django): one segment; <path:p>: the rest.
//
// A colon inside a segment ("things:batchGet", as gRPC transcoding names
// custom methods) is literal.
func segmentKind(seg string) int {
	switch {
	case seg == "":
		return segLiteral
	case seg == "{$}":
		return segEnd
	case seg[0] == '*':
		return segRest
	case seg[0] == ':' && len(seg) > 1:
		return segOne
	case seg[0] == '{' && seg[len(seg)-1] == '}' && len(seg) > 2:
		inner := seg[1 : len(seg)-1]
		if strings.HasSuffix(inner, "...") || strings.HasPrefix(inner, "*") || strings.HasSuffix(inner, ":path") {
			return segRest
		}
		return segOne
	case seg[0] == '<' && seg[len(seg)-1] == '>' && len(seg) > 2:
		if strings.HasPrefix(seg, "<path:") {
			return segRest
		}
		return segOne
	}
	return segLiteral
}
