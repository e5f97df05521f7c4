// SPDX-License-Identifier: Apache-2.0

package hookshttp_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/errorownership/errorownership/hooks"
	"github.com/errorownership/errorownership/hooks/hookshttp"
	"github.com/errorownership/errorownership/hooks/internal/soaktest"
	"github.com/errorownership/errorownership/ownership"
)

// rawCallee is a callee that writes its responses byte for byte: what no
// well-behaved net/http server would send. It reads each request, then
// hands the connection to respond, which writes an answer and reports
// whether the connection may carry another request.
type rawCallee struct {
	ln       net.Listener
	url      string
	requests atomic.Int32
	stop     chan struct{} // closed when the test ends: stalled answers give up
	wg       sync.WaitGroup
}

func newRawCallee(t *testing.T, respond func(w *bufio.Writer, stop <-chan struct{}) (keepAlive bool)) *rawCallee {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &rawCallee{ln: ln, url: "http://" + ln.Addr().String(), stop: make(chan struct{})}
	var conns sync.Map
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Store(conn, true)
			c.wg.Add(1)
			go func() {
				defer c.wg.Done()
				defer conn.Close()
				br, bw := bufio.NewReader(conn), bufio.NewWriter(conn)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					c.requests.Add(1)
					keep := respond(bw, c.stop)
					if bw.Flush() != nil || !keep {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		close(c.stop)
		ln.Close()
		conns.Range(func(k, _ any) bool { k.(net.Conn).Close(); return true })
		c.wg.Wait()
	})
	return c
}

// status500 starts a 500 answer; the caller adds headers and ends them.
const status500 = "HTTP/1.1 500 Internal Server Error\r\n"

// headers answers 500 with the raw header lines extra and an empty body.
func headers(extra string) func(w *bufio.Writer, _ <-chan struct{}) bool {
	return func(w *bufio.Writer, _ <-chan struct{}) bool {
		_, _ = w.WriteString(status500 + extra + "Content-Length: 0\r\n\r\n")
		return true
	}
}

// repeat returns n header lines "name: value\r\n".
func repeat(name, value string, n int) string {
	return strings.Repeat(name+": "+value+"\r\n", n)
}

const mib = 1 << 20

// hostileCallee is a lie or garbage a callee can send back; want is the
// claim the hooks must read on it.
type hostileCallee struct {
	name    string
	respond func(w *bufio.Writer, stop <-chan struct{}) bool
	want    ownership.Claim
}

// hostileCallees returns them all. It builds them on each call, so that
// the megabytes of them weigh on no other test or benchmark of the
// package.
func hostileCallees() []hostileCallee {
	return []hostileCallee{
		{"claims everything", headers("Error-Claim: claimed\r\n"), ownership.ClaimClaimed},
		{"unclaims everything", headers("Error-Claim: unclaimed\r\n"), ownership.ClaimUnclaimed},
		{"an invalid value", headers("Error-Claim: yes-please\r\n"), ownership.ClaimMissing},
		{"invalid UTF-8", headers("Error-Claim: \xff\xfe\xfd\r\n"), ownership.ClaimMissing},
		{"claimed, then invalid UTF-8", headers("Error-Claim: claimed\xc3\x28\r\n"), ownership.ClaimMissing},
		{"claimed with a NUL", headers("Error-Claim: claimed\x00\r\n"), ownership.ClaimMissing},
		{"claimed with trailing spaces", headers("Error-Claim: claimed   \r\n"), ownership.ClaimClaimed},
		{"a 1 MiB claim", headers("Error-Claim: " + strings.Repeat("claimed", mib/7) + "\r\n"), ownership.ClaimMissing},
		{"a 1 MiB header beside the claim", headers("X-Junk: " + strings.Repeat("j", mib) + "\r\nError-Claim: claimed\r\n"), ownership.ClaimClaimed},
		{"1000 repeated claims", headers(repeat("Error-Claim", "claimed", 1000)), ownership.ClaimMissing},
		{"claimed and unclaimed", headers("Error-Claim: claimed\r\nerror-claim: unclaimed\r\n"), ownership.ClaimMissing},
		{"a comma list", headers("Error-Claim: claimed, unclaimed\r\n"), ownership.ClaimMissing},
		{"an empty claim", headers("Error-Claim:\r\n"), ownership.ClaimMissing},
		{"an odd letter case", headers("eRRoR-cLaIm: CLAIMED\r\n"), ownership.ClaimClaimed},
		{"10,000 junk headers", headers(repeat("X-Junk", "j", 10000) + "Error-Claim: claimed\r\n"), ownership.ClaimClaimed},
		{"a body that never ends", func(w *bufio.Writer, stop <-chan struct{}) bool {
			_, _ = w.WriteString(status500 + "Error-Claim: claimed\r\nContent-Length: 100000\r\n\r\n" + strings.Repeat("x", 10))
			_ = w.Flush()
			<-stop
			return false
		}, ownership.ClaimClaimed},
		{"a body that trickles", func(w *bufio.Writer, stop <-chan struct{}) bool {
			_, _ = w.WriteString(status500 + "Error-Claim: claimed\r\nTransfer-Encoding: chunked\r\n\r\n")
			for {
				_, _ = w.WriteString("1\r\nx\r\n")
				if w.Flush() != nil {
					return false
				}
				select {
				case <-stop:
					return false
				case <-time.After(100 * time.Millisecond):
				}
			}
		}, ownership.ClaimClaimed},
		{"a 64 MiB body", func(w *bufio.Writer, _ <-chan struct{}) bool {
			_, _ = w.WriteString(status500 + "Error-Claim: claimed\r\nContent-Length: 67108864\r\n\r\n")
			chunk := strings.Repeat("x", 64<<10)
			for range 1024 {
				if _, err := w.WriteString(chunk); err != nil {
					return false
				}
			}
			return true
		}, ownership.ClaimClaimed},
		{"a broken chunked body", func(w *bufio.Writer, _ <-chan struct{}) bool {
			_, _ = w.WriteString(status500 + "Error-Claim: claimed\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nnot a chunk\r\n")
			return false
		}, ownership.ClaimClaimed},
		{"a claim on a 200", func(w *bufio.Writer, _ <-chan struct{}) bool {
			_, _ = w.WriteString("HTTP/1.1 200 OK\r\nError-Claim: unclaimed\r\nContent-Length: 2\r\n\r\nok")
			return true
		}, ownership.ClaimMissing},
	}
}

// roundTrip makes one call through rt and reads only the status: a caller
// that does not want the body does not wait for it.
type result struct {
	status  int
	err     error
	took    time.Duration
	outcome hooks.Outcome
}

func roundTrip(t *testing.T, rt http.RoundTripper, url string) result {
	t.Helper()
	// The deadline only keeps a hook that hangs from hanging the test.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctx, ledger := hooks.WithLedger(ctx)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	start := time.Now()
	res, err := rt.RoundTrip(req)
	r := result{err: err, took: time.Since(start)}
	if res != nil {
		r.status = res.StatusCode
		res.Body.Close()
	}
	if outs := ledger.Outcomes(nil); len(outs) == 1 {
		r.outcome = outs[0]
	}
	return r
}

// TestHostileCallee sends every lie and every kind of garbage a callee
// can answer with through the transport and the middleware of a caller,
// and checks that the hooks only ever ignore or neutralise it: the caller
// gets what a caller without the hooks gets (the same status, or an error
// where it gets one), as fast (a body that never ends does not hold the
// retry), the claim read is clean, nothing panics, and the caller's own
// Error-Claim is one clean value whatever its callee sent.
func TestHostileCallee(t *testing.T) {
	// The hooks may add their retry (one, 1–2 ms later) to a call, and
	// nothing else: a call with the hooks may take two attempts' time and
	// slack for a loaded machine; a hook that waited on a stalled body
	// would wait until the test's deadline.
	slack := soaktest.Pick(time.Second, 5*time.Second, time.Second)
	for _, tc := range hostileCallees() {
		t.Run(tc.name, func(t *testing.T) {
			callee := newRawCallee(t, tc.respond)
			bare := &http.Transport{}
			t.Cleanup(bare.CloseIdleConnections)
			base := &http.Transport{}
			t.Cleanup(base.CloseIdleConnections)
			rt := hookshttp.Transport(base, fastRetries...)

			without := roundTrip(t, bare, callee.url)
			with := roundTrip(t, rt, callee.url)
			if (with.err == nil) != (without.err == nil) || with.status != without.status {
				t.Fatalf("with the hooks: status %d, error %v; without: status %d, error %v", with.status, with.err, without.status, without.err)
			}
			if with.took > 2*without.took+slack {
				t.Errorf("the call took %v with the hooks, %v without", with.took, without.took)
			}
			o := with.outcome
			if without.err == nil && without.status >= 500 && o.Received != tc.want {
				t.Errorf("read claim %v, want %v", o.Received, tc.want)
			}
			wantCalls := int32(3) // bare, and two attempts
			if without.status < 500 || tc.want == ownership.ClaimUnclaimed {
				wantCalls = 2
			}
			if without.err != nil {
				wantCalls = -1 // the answer may not have been read whole
			}
			if got := callee.requests.Load(); wantCalls > 0 && got != wantCalls {
				t.Errorf("the callee served %d requests, want %d", got, wantCalls)
			}

			// A caller service with the middleware, relaying the failure:
			// its own claim is exactly one clean value.
			var b http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, callee.url, nil)
				res, err := rt.RoundTrip(req)
				if err != nil {
					http.Error(w, err.Error(), http.StatusBadGateway)
					return
				}
				res.Body.Close()
				w.WriteHeader(res.StatusCode)
			})
			srv := httptest.NewServer(hookshttp.Middleware(b))
			t.Cleanup(srv.Close)
			start := time.Now()
			client := &http.Client{Timeout: 10 * time.Second}
			res, err := client.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if took := time.Since(start); took > 2*without.took+slack {
				t.Errorf("the caller's request took %v", took)
			}
			claims := res.Header.Values(ownership.HTTPClaimHeader)
			switch {
			case res.StatusCode < 500 && len(claims) != 0:
				t.Errorf("the caller answered %d with Error-Claim %q", res.StatusCode, claims)
			case res.StatusCode >= 500 && (len(claims) != 1 || ownership.ParseClaim(claims[0]) == ownership.ClaimMissing):
				t.Errorf("the caller answered %d with Error-Claim %q, want one clean claim", res.StatusCode, claims)
			}
		})
	}
}

// hugeHeaders is a RoundTripper that answers every request with a 500
// whose headers hold a fresh 1 MiB of garbage, in the Error-Claim header
// and beside it, as net/http would have parsed them off the wire.
type hugeHeaders struct{ repeated bool }

func (h hugeHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	junk := strings.Repeat("\xff", mib) // fresh each time: a copy kept anywhere shows
	hdr := http.Header{"X-Junk": {junk}, ownership.HTTPClaimHeader: {junk}}
	if h.repeated {
		hdr[ownership.HTTPClaimHeader] = strings.Split(strings.Repeat("claimed,", 1000), ",")
	}
	return &http.Response{StatusCode: http.StatusInternalServerError, Header: hdr, Body: http.NoBody, Request: r}, nil
}

// TestHostileHeadersAllocateNothing measures what the transport and the
// middleware allocate, and what they keep, for calls whose answers carry
// 1 MiB headers: a hook that copied a header, or kept one past its
// request, would show megabytes.
func TestHostileHeadersAllocateNothing(t *testing.T) {
	for _, repeated := range []bool{false, true} {
		t.Run(fmt.Sprintf("repeated=%v", repeated), func(t *testing.T) {
			src := hugeHeaders{repeated: repeated}
			rt := hookshttp.Transport(src, hookshttp.WithMaxAttempts(2), hookshttp.WithBackoff(0, 0))
			h := hookshttp.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, "http://callee/x", nil)
				res, err := rt.RoundTrip(req)
				if err != nil {
					panic(err)
				}
				res.Body.Close()
				w.WriteHeader(http.StatusBadGateway)
			}))
			in := httptest.NewRequest(http.MethodGet, "/checkout", nil)
			serve := func() { h.ServeHTTP(httptest.NewRecorder(), in) }
			// The same work without the hooks: the callee's own
			// allocations, two attempts' worth.
			bare := func() {
				for range 2 {
					res, _ := src.RoundTrip(in)
					res.Body.Close()
				}
				httptest.NewRecorder().WriteHeader(http.StatusBadGateway)
			}
			soaktest.CheckAllocs(t, soaktest.Pick[uint64](50, 5, 500), serve, bare, "request", "1 MiB headers")
		})
	}
}

// TestStalledBodyDoesNotHoldTheRetry: a callee that fails and then never
// finishes its body gets retried on time, and the hooks' reading of the
// abandoned body ends (no goroutine or connection is left behind) once
// the retry has gone, even though the callee keeps the body open.
func TestStalledBodyDoesNotHoldTheRetry(t *testing.T) {
	callee := newRawCallee(t, func(w *bufio.Writer, stop <-chan struct{}) bool {
		_, _ = w.WriteString(status500 + "Error-Claim: claimed\r\nContent-Length: 100000\r\n\r\n" + strings.Repeat("x", 10))
		_ = w.Flush()
		<-stop
		return false
	})
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	conns, _ := soaktest.Matching(persistConn)
	rt := hookshttp.Transport(base, hookshttp.WithMaxAttempts(3), hookshttp.WithBackoff(5*time.Millisecond, 10*time.Millisecond))
	r := roundTrip(t, rt, callee.url)
	if r.err != nil || r.status != http.StatusInternalServerError || r.outcome.Decision != ownership.DecisionExhausted {
		t.Fatalf("status %d, error %v, outcome %+v", r.status, r.err, r.outcome)
	}
	if got := callee.requests.Load(); got != 3 {
		t.Fatalf("%d attempts, want 3", got)
	}
	if r.took > time.Second {
		t.Errorf("three attempts took %v: the retries waited on the stalled bodies", r.took)
	}
	// The two abandoned bodies are given up within the drain's time limit
	// and their connections closed; the third went to the caller, which
	// closed it. Nothing of the hooks is left running.
	soaktest.WaitMatching(t, persistConn, conns, 5*time.Second)
	soaktest.WaitMatching(t, "hooks/hookshttp.", 0, 5*time.Second)
}

// persistConn is in the stack of the goroutines of each open connection
// of an http.Transport.
const persistConn = "net/http.(*persistConn).readLoop"

// TestHostileCalleeThroughReverseProxy relays every hostile answer through
// an httputil.ReverseProxy behind the middleware, with the transport under
// it: the proxy copies the callee's headers, Error-Claim included, into
// its own answer, where a handler's own claim wins. A relayed claim that
// is not one clean value is not a claim: the middleware decides and sends
// its own. (A clean one cannot be told from the handler's own: see the
// next test.)
func TestHostileCalleeThroughReverseProxy(t *testing.T) {
	for _, tc := range hostileCallees() {
		t.Run(tc.name, func(t *testing.T) {
			callee := newRawCallee(t, tc.respond)
			target, _ := url.Parse(callee.url)
			get := func(h func(http.Handler) http.Handler, rt http.RoundTripper) (*http.Response, error) {
				proxy := &httputil.ReverseProxy{
					Rewrite:   func(r *httputil.ProxyRequest) { r.SetURL(target) },
					Transport: rt,
					ErrorLog:  log.New(io.Discard, "", 0),
				}
				srv := httptest.NewServer(h(proxy))
				t.Cleanup(srv.Close)
				client := &http.Client{Timeout: time.Second}
				res, err := client.Get(srv.URL)
				if err == nil {
					res.Body.Close()
				}
				return res, err
			}
			bare := &http.Transport{}
			t.Cleanup(bare.CloseIdleConnections)
			if _, err := get(func(h http.Handler) http.Handler { return h }, bare); err != nil {
				t.Skipf("a proxy without the hooks cannot relay this answer either: %v", err)
			}
			base := &http.Transport{}
			t.Cleanup(base.CloseIdleConnections)
			res, err := get(func(h http.Handler) http.Handler { return hookshttp.Middleware(h) }, hookshttp.Transport(base, fastRetries...))
			if err != nil {
				// Whether a proxy relays a body that breaks midway depends on
				// whether its header was flushed first: timing. The hooks are
				// at fault only if a bare proxy always relays it; if it fails
				// the same way, the hooks did no worse, which is the claim.
				for range 20 {
					if _, bareErr := get(func(h http.Handler) http.Handler { return h }, bare); bareErr != nil {
						t.Logf("a proxy without the hooks fails on this answer too: %v (with the hooks: %v)", bareErr, err)
						return
					}
				}
				t.Fatal(err)
			}
			claims := res.Header.Values(ownership.HTTPClaimHeader)
			if res.StatusCode >= 500 && (len(claims) != 1 || len(claims[0]) > 64 || ownership.ParseClaim(claims[0]) == ownership.ClaimMissing) {
				first := ""
				if len(claims) > 0 {
					first = claims[0][:min(len(claims[0]), 40)]
				}
				t.Errorf("the proxy answered %d with %d Error-Claim values, the first %q, want one clean claim", res.StatusCode, len(claims), first)
			}
		})
	}
}

// TestReverseProxyDropsRelayedClaim: a callee that claims everything,
// behind a reverse proxy that drops the relayed Error-Claim (as the
// middleware's documentation asks), leaves the proxy's middleware to
// decide: unclaimed, since the proxy's call failed, so that the proxy's
// callers do not retry what the proxy already retried.
func TestReverseProxyDropsRelayedClaim(t *testing.T) {
	callee := newRawCallee(t, headers("Error-Claim: claimed\r\n"))
	target, _ := url.Parse(callee.url)
	proxy := &httputil.ReverseProxy{
		Rewrite:   func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport: hookshttp.Transport(http.DefaultTransport, fastRetries...),
		ModifyResponse: func(res *http.Response) error {
			res.Header.Del(ownership.HTTPClaimHeader)
			return nil
		},
	}
	srv := httptest.NewServer(hookshttp.Middleware(proxy))
	t.Cleanup(srv.Close)
	res, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if got := res.Header.Values(ownership.HTTPClaimHeader); res.StatusCode != http.StatusInternalServerError || len(got) != 1 || got[0] != "unclaimed" {
		t.Fatalf("the proxy answered %d with Error-Claim %q, want 500 unclaimed", res.StatusCode, got)
	}
	if n := callee.requests.Load(); n != 2 {
		t.Fatalf("the callee served %d requests, want 2", n)
	}
}
