package hints

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/errorownership/errorownership/hooks"
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
// Its methods are safe for concurrent use; Mode and BudgetLimits are one
// atomic load and a map lookup.
type Client struct {
	url      string
	service  string
	http     *http.Client
	now      func() time.Time
	maxStale time.Duration

	state atomic.Pointer[state]

	mu       sync.Mutex // serialises Refresh
	etag     string
	failures int
}

var _ hooks.HintSource = (*Client)(nil)

// state is one good answer, immutable once stored.
type state struct {
	hints   *Hints
	index   index
	limits  hooks.Limits
	checked time.Time // when the collector last confirmed these hints
}

// An Option configures a Client.
type Option func(*Client)

// WithHTTPClient makes the Client fetch with hc (default: a client with a
// 5 s timeout).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithClock makes the Client read time from now, for tests.
func WithClock(now func() time.Time) Option { return func(c *Client) { c.now = now } }

// WithMaxStale sets how long the last good hints outlive the collector's
// silence (default DefaultMaxStale).
func WithMaxStale(d time.Duration) Option { return func(c *Client) { c.maxStale = d } }

// New returns a Client for service's hints at baseURL (e.g.
// "http://otel-collector:4320"). It does not fetch; call Run or Refresh,
// or use Start.
func New(baseURL, service string, opts ...Option) *Client {
	c := &Client{
		url:      strings.TrimSuffix(baseURL, "/") + Path + "?service=" + url.QueryEscape(service),
		service:  service,
		http:     &http.Client{Timeout: 5 * time.Second},
		now:      time.Now,
		maxStale: DefaultMaxStale,
	}
	for _, o := range opts {
		o(c)
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
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "application/json")
	old := c.state.Load()
	if old != nil && c.etag != "" {
		req.Header.Set("If-None-Match", c.etag)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()

	switch {
	case res.StatusCode == http.StatusNotModified && old != nil:
		st := *old
		st.checked = c.now()
		c.state.Store(&st)
		return pollAfter(res.Header, old.hints), nil
	case res.StatusCode != http.StatusOK:
		return 0, fmt.Errorf("hints: %s: %s", c.url, res.Status)
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, maxBody+1))
	if err != nil {
		return 0, err
	}
	if len(body) > maxBody {
		return 0, fmt.Errorf("hints: %s: body over %d bytes", c.url, maxBody)
	}
	h := new(Hints)
	if err := json.Unmarshal(body, h); err != nil {
		return 0, fmt.Errorf("hints: %s: %w", c.url, err)
	}
	if err := h.validate(c.service); err != nil {
		return 0, fmt.Errorf("hints: %s: %w", c.url, err)
	}
	c.state.Store(&state{hints: h, index: newIndex(h.Edges), limits: h.Limits(), checked: c.now()})
	c.etag = res.Header.Get("ETag")
	return pollAfter(res.Header, h), nil
}

// validate rejects what a sane collector cannot have meant. A budget out of
// range would let a bad answer start a storm, so the whole answer goes.
func (h *Hints) validate(service string) error {
	switch {
	case h.Version != Version:
		return fmt.Errorf("version %d, want %d", h.Version, Version)
	case h.Service != "" && h.Service != service:
		return fmt.Errorf("hints for service %q, want %q", h.Service, service)
	case h.TTLSeconds < 0:
		return errors.New("negative ttl_seconds")
	}
	if b := h.RetryBudget; b != nil {
		if !(b.Ratio >= 0 && b.Ratio <= 1) || !(b.MinRetriesPerSecond >= 0) || math.IsInf(b.MinRetriesPerSecond, 0) {
			return fmt.Errorf("retry_budget out of range: ratio %v, min_retries_per_second %v", b.Ratio, b.MinRetriesPerSecond)
		}
	}
	return nil
}

// pollAfter is the response's max-age, else the hints' TTL, else
// DefaultTTL, within [1 s, 10 min].
func pollAfter(hdr http.Header, h *Hints) time.Duration {
	d := DefaultTTL
	if age, ok := maxAge(hdr.Get("Cache-Control")); ok {
		d = age
	} else if h != nil && h.TTLSeconds > 0 {
		d = time.Duration(h.TTLSeconds) * time.Second
	}
	return min(max(d, minPoll), maxPoll)
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
		return time.Duration(n) * time.Second, true
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
// peerOperation). With peerOperation "" it answers for every edge to the
// peer: fail-open only if all of them are. When the hints know no edge from
// operation to the peer (or operation is ""), it asks the same question
// over every inbound operation. Without hints it is ModeUnknown.
func (c *Client) Mode(operation, peerService, peerOperation string) hooks.Mode {
	st := c.current()
	if st == nil {
		return hooks.ModeUnknown
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
func (c *Client) Hints() (*Hints, bool) {
	if st := c.current(); st != nil {
		return st.hints, true
	}
	return nil, false
}

// index answers mode questions at every level of detail the hooks may
// have: one map, keyed by the edge with the parts the question leaves out
// marked as wildcards.
type index map[edgeKey]tally

type edgeKey struct {
	operation, peerService, peerOperation string
	wild                                  uint8
}

const (
	wildOperation uint8 = 1 << iota
	wildPeerOperation
)

// tally counts the modes of the edges a key covers.
type tally struct{ open, close, unknown int }

func (t tally) mode() hooks.Mode {
	switch {
	case t.close > 0:
		return hooks.ModeFailClose
	case t.open > 0 && t.unknown == 0:
		return hooks.ModeFailOpen
	}
	return hooks.ModeUnknown
}

func newIndex(edges []Edge) index {
	ix := make(index, 4*len(edges))
	for _, e := range edges {
		for _, k := range [...]edgeKey{
			{e.Operation, e.PeerService, e.PeerOperation, 0},
			{e.Operation, e.PeerService, "", wildPeerOperation},
			{"", e.PeerService, e.PeerOperation, wildOperation},
			{"", e.PeerService, "", wildOperation | wildPeerOperation},
		} {
			t := ix[k]
			switch e.Mode {
			case hooks.ModeFailOpen:
				t.open++
			case hooks.ModeFailClose:
				t.close++
			default:
				t.unknown++
			}
			ix[k] = t
		}
	}
	return ix
}

func (ix index) mode(operation, peerService, peerOperation string) hooks.Mode {
	var wild uint8
	if peerOperation == "" {
		wild = wildPeerOperation
	}
	if operation != "" {
		if t, ok := ix[edgeKey{operation, peerService, peerOperation, wild}]; ok {
			return t.mode()
		}
	}
	if t, ok := ix[edgeKey{"", peerService, peerOperation, wild | wildOperation}]; ok {
		return t.mode()
	}
	return hooks.ModeUnknown
}
