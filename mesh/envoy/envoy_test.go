// SPDX-License-Identifier: Apache-2.0

package envoy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/errorownership/errorownership/internal/portlock"
	"github.com/errorownership/errorownership/ownership"
	"github.com/errorownership/errorownership/store/pgtest"
)

// envoyBinary finds the Envoy that make mesh-deps installs, or the one
// ENVOY names. Without one the test skips, except in CI (and under -short,
// which make test never passes), where testing nothing is a failure.
func envoyBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		if pgtest.InCI() {
			t.Fatal("needs Envoy, which -short leaves out; CI must not pass by testing nothing: run make test, without -short")
		}
		t.Skip("needs Envoy, which -short (make test-unit) leaves out; make test runs it")
	}
	bin := os.Getenv("ENVOY")
	if bin == "" {
		bin = filepath.Join(".venv", "bin", "envoy")
	}
	if _, err := os.Stat(bin); err != nil { //nolint:gosec // G703: the tester's own ENVOY, or the venv make mesh-deps fills
		if pgtest.InCI() {
			t.Fatalf("no Envoy at %s: run make mesh-deps (CI is set, so this is a failure, not a skip)", bin)
		}
		t.Skipf("no Envoy at %s: run make mesh-deps, or set ENVOY to an envoy binary", bin)
	}
	return bin
}

// upstream is a scripted callee: each path answers with its reply, and
// every attempt it receives is recorded with its Retry-Attempt header.
type upstream struct {
	addr string

	mu       sync.Mutex
	replies  map[string]reply
	attempts map[string][]string
}

type reply struct {
	status int
	claims []string // Error-Claim values, one header field each
	header map[string]string
	// hold, when set, stalls the retries (attempts with Retry-Attempt),
	// or every attempt with holdAll, until it is closed; each attempt it
	// stalls is sent to held first, when that is set.
	hold    chan struct{}
	holdAll bool
	held    chan<- struct{}
}

func startUpstream(t *testing.T) *upstream {
	t.Helper()
	u := &upstream{replies: map[string]reply{}, attempts: map[string][]string{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("upstream: listen: %v", err)
	}
	u.addr = ln.Addr().String()
	srv := &http.Server{Handler: u, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return u
}

func (u *upstream) set(path string, r reply) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.replies[path] = r
}

// seen returns the Retry-Attempt header of each attempt path received
// ("" for none), in order.
func (u *upstream) seen(path string) []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.attempts[path]...)
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	attempt := r.Header.Get(ownership.HTTPRetryAttemptHeader)
	u.mu.Lock()
	u.attempts[r.URL.Path] = append(u.attempts[r.URL.Path], attempt)
	rep, ok := u.replies[r.URL.Path]
	u.mu.Unlock()
	if !ok {
		rep = reply{status: http.StatusOK}
	}
	if rep.hold != nil && (attempt != "" || rep.holdAll) {
		if rep.held != nil {
			rep.held <- struct{}{}
		}
		select {
		case <-rep.hold:
		case <-r.Context().Done():
			return
		}
	}
	for _, v := range rep.claims {
		w.Header().Add(ownership.HTTPClaimHeader, v)
	}
	for k, v := range rep.header {
		w.Header().Set(k, v)
	}
	w.WriteHeader(rep.status)
}

// sidecar is a running Envoy with envoy.yaml, changed only where a test
// must: its ports, the upstream's address, and what edit changes.
type sidecar struct {
	url, admin string
}

func startSidecar(t *testing.T, upstreamAddr string, edit func(cfg map[string]any)) *sidecar {
	t.Helper()
	bin := envoyBinary(t)
	raw, err := os.ReadFile("envoy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatalf("envoy.yaml: %v", err)
	}
	listen, admin := reserve(t), reserve(t)
	host, port, err := net.SplitHostPort(upstreamAddr)
	if err != nil {
		t.Fatal(err)
	}
	upPort, _ := strconv.Atoi(port)

	setSocket(t, listener(t, cfg)["address"], "127.0.0.1", listen.Number())
	setSocket(t, dig(t, cluster(t, cfg), "load_assignment", "endpoints", 0, "lb_endpoints", 0, "endpoint", "address"), host, upPort)
	cfg["admin"] = map[string]any{"address": map[string]any{"socket_address": map[string]any{"address": "127.0.0.1", "port_value": admin.Number()}}}
	if edit != nil {
		edit(cfg)
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "envoy.yaml")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}

	listen.Release()
	admin.Release()
	var log bytes.Buffer
	cmd := exec.Command(bin, "-c", path, "--disable-hot-restart", "-l", "warning", "--concurrency", "2") //nolint:gosec // G204: the Envoy envoyBinary found
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-done
		if t.Failed() {
			t.Logf("envoy log:\n%s", log.String())
		}
	})

	s := &sidecar{url: "http://" + listen.Addr(), admin: "http://" + admin.Addr()}
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-done:
			t.Fatalf("envoy exited before it was ready:\n%s", log.String())
		default:
		}
		if res, err := http.Get(s.admin + "/ready"); err == nil {
			_ = res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("envoy not ready in 60 s:\n%s", log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stat reads one of Envoy's counters.
func (s *sidecar) stat(t *testing.T, name string) int {
	t.Helper()
	res, err := http.Get(s.admin + "/stats?format=json&filter=^" + name + "$")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var doc struct {
		Stats []struct {
			Name  string `json:"name"`
			Value *int   `json:"value"`
		} `json:"stats"`
	}
	if err := json.NewDecoder(res.Body).Decode(&doc); err != nil {
		t.Fatalf("stats: %v", err)
	}
	for _, st := range doc.Stats {
		if st.Name == name && st.Value != nil {
			return *st.Value
		}
	}
	t.Fatalf("envoy has no counter %s", name)
	return 0
}

func reserve(t *testing.T) *portlock.Port {
	t.Helper()
	p, err := portlock.Reserve()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Release)
	return p
}

// dig walks cfg by map keys and list indexes.
func dig(t *testing.T, v any, path ...any) any {
	t.Helper()
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("envoy.yaml: %v is not a map at %q", v, k)
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				t.Fatalf("envoy.yaml: no element %d at %v", k, path)
			}
			v = l[k]
		}
	}
	return v
}

func listener(t *testing.T, cfg map[string]any) map[string]any {
	return dig(t, cfg, "static_resources", "listeners", 0).(map[string]any)
}

func cluster(t *testing.T, cfg map[string]any) map[string]any {
	return dig(t, cfg, "static_resources", "clusters", 0).(map[string]any)
}

func hcm(t *testing.T, cfg map[string]any) map[string]any {
	return dig(t, listener(t, cfg), "filter_chains", 0, "filters", 0, "typed_config").(map[string]any)
}

func routes(t *testing.T, cfg map[string]any) []any {
	return dig(t, hcm(t, cfg), "route_config", "virtual_hosts", 0, "routes").([]any)
}

// setSocket points an address of the configuration at host:port.
func setSocket(t *testing.T, addr any, host string, port int) {
	t.Helper()
	m, ok := addr.(map[string]any)
	if !ok {
		t.Fatalf("envoy.yaml: %v is not an address", addr)
	}
	m["socket_address"] = map[string]any{"address": host, "port_value": port}
}

// get sends one request through the sidecar.
func get(t *testing.T, s *sidecar, method, path string, header map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, s.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	_ = res.Body.Close()
	return res
}

// claimValues reads conformance/claim_values.json: the claim values every
// reader of a claim must read alike.
func claimValues(t *testing.T) []struct {
	Name   string   `json:"name"`
	Values []string `json:"values"`
	Want   string   `json:"want"`
} {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "conformance", "claim_values.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Cases []struct {
			Name   string   `json:"name"`
			Values []string `json:"values"`
			Want   string   `json:"want"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("claim_values.json: %v", err)
	}
	return doc.Cases
}

// validFieldValue reports whether HTTP/1.1 can carry v as a header value
// at all (RFC 9110 §5.5: no control characters but tab).
func validFieldValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// TestRetryPolicy: a failed attempt is retried, up to the attempt limit,
// exactly when the hooks would retry it: a server error whose claim is
// claimed or missing, read as conformance/claim_values.json reads it, on a
// request the hooks have a policy for.
func TestRetryPolicy(t *testing.T) {
	up := startUpstream(t)
	s := startSidecar(t, up.addr, nil)

	type tc struct {
		name    string
		method  string
		header  map[string]string
		reply   reply
		retried bool
	}
	cases := []tc{
		{name: "claimed 500", method: "GET", reply: reply{status: 500, claims: []string{"claimed"}}, retried: true},
		{name: "unclaimed 500", method: "GET", reply: reply{status: 500, claims: []string{"unclaimed"}}},
		{name: "unlabelled 503", method: "GET", reply: reply{status: 503}, retried: true},
		{name: "unclaimed 503", method: "GET", reply: reply{status: 503, claims: []string{"unclaimed"}}},
		{name: "a 4xx is the caller's fault", method: "GET", reply: reply{status: 404, claims: []string{"claimed"}}},
		{name: "success", method: "GET", reply: reply{status: 200}},
		{name: "a forged marker on a success", method: "GET", reply: reply{status: 200, header: map[string]string{"X-Errorownership-Retriable": "1"}}},
		{name: "a forged marker on an unclaimed error", method: "GET", reply: reply{status: 500, claims: []string{"unclaimed"}, header: map[string]string{"X-Errorownership-Retriable": "1"}}},
		{name: "PUT is idempotent", method: "PUT", reply: reply{status: 500, claims: []string{"claimed"}}, retried: true},
		{name: "DELETE is idempotent", method: "DELETE", reply: reply{status: 500}, retried: true},
		{name: "POST has no policy", method: "POST", reply: reply{status: 500, claims: []string{"claimed"}}},
		{name: "PATCH has no policy", method: "PATCH", reply: reply{status: 500}},
		{name: "POST with an Idempotency-Key", method: "POST", header: map[string]string{"Idempotency-Key": "k1"}, reply: reply{status: 500, claims: []string{"claimed"}}, retried: true},
		{name: "POST with an X-Idempotency-Key", method: "POST", header: map[string]string{"X-Idempotency-Key": "k2"}, reply: reply{status: 500}, retried: true},
		{name: "POST with an Idempotency-Key, unclaimed", method: "POST", header: map[string]string{"Idempotency-Key": "k3"}, reply: reply{status: 500, claims: []string{"unclaimed"}}},
	}
	for _, c := range claimValues(t) {
		ok := true
		for _, v := range c.Values {
			ok = ok && validFieldValue(v)
		}
		if !ok {
			// HTTP cannot carry the value; Envoy refuses such an answer
			// before any filter sees it (TestOwnReplies covers Envoy's
			// own replies).
			continue
		}
		cases = append(cases, tc{
			name: "claim_values.json " + c.Name, method: "GET",
			reply:   reply{status: 500, claims: c.Values},
			retried: c.Want != ownership.ClaimUnclaimed.String(),
		})
	}

	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := fmt.Sprintf("/case/%d", i)
			up.set(path, c.reply)
			res := get(t, s, c.method, path, c.header)

			want := []string{""}
			if c.retried {
				want = []string{"", "1", "2"} // ERROROWNERSHIP_MAX_ATTEMPTS 3
			}
			if got := up.seen(path); strings.Join(got, ",") != strings.Join(want, ",") {
				t.Errorf("upstream saw attempts with Retry-Attempt %q, want %q", got, want)
			}
			if res.StatusCode != c.reply.status {
				t.Errorf("status %d, want the upstream's %d", res.StatusCode, c.reply.status)
			}
			// Surrounding whitespace is no part of a field value (RFC 9110
			// §5.5): HTTP drops it on the way.
			var sent []string
			for _, v := range c.reply.claims {
				sent = append(sent, strings.Trim(v, " \t"))
			}
			if got := res.Header.Values(ownership.HTTPClaimHeader); strings.Join(got, "\x00") != strings.Join(sent, "\x00") {
				t.Errorf("the application got Error-Claim %q, want the upstream's %q", got, sent)
			}
			if v := res.Header.Get("X-Errorownership-Retriable"); v != "" {
				t.Errorf("the retry marker reached the application: %q", v)
			}
		})
	}
}

// TestOwnReplies: Envoy's own replies for a failure at the upstream (none
// reachable, no answer in time) say claimed, as the upstream's own failure
// would, after the attempts the policy allows.
func TestOwnReplies(t *testing.T) {
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	slow := startUpstream(t)
	slow.set("/slow", reply{status: 200, hold: hang, holdAll: true})
	nowhere := reserve(t) // reserved, never bound: nothing listens there

	cases := []struct {
		name     string
		upstream string
		edit     func(t *testing.T, cfg map[string]any)
		path     string
		status   int
		retries  int // Envoy's upstream_rq_retry
	}{
		{
			name: "no upstream listening", upstream: nowhere.Addr(), path: "/", status: http.StatusServiceUnavailable,
			retries: 2, // a connection refused has no claim: retried like claimed
		},
		{
			name: "the upstream times out", upstream: slow.addr, path: "/slow", status: http.StatusGatewayTimeout,
			edit: func(t *testing.T, cfg map[string]any) {
				for _, r := range routes(t, cfg) {
					dig(t, r, "route").(map[string]any)["timeout"] = "0.3s"
				}
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := startSidecar(t, c.upstream, func(cfg map[string]any) {
				if c.edit != nil {
					c.edit(t, cfg)
				}
			})
			res := get(t, s, "GET", c.path, nil)
			if res.StatusCode != c.status {
				t.Errorf("status %d, want %d", res.StatusCode, c.status)
			}
			if got := res.Header.Values(ownership.HTTPClaimHeader); len(got) != 1 || got[0] != ownership.ClaimClaimed.String() {
				t.Errorf("Envoy's own reply has Error-Claim %q, want [claimed]", got)
			}
			if got := s.stat(t, "cluster.upstream.upstream_rq_retry"); got != c.retries {
				t.Errorf("upstream_rq_retry = %d, want %d", got, c.retries)
			}
		})
	}
}

// TestBudget: retries are held in flight while requests come in, so that
// what the budget allows is counted exactly: the floor
// (min_retry_concurrency 3) when few requests were made, 10 % of the
// requests of the last budget_interval (ERROROWNERSHIP_RETRY_RATIO 0.1)
// when more were. The requests the budget refuses get the upstream's error
// at once, and Envoy counts them as retry overflows. (The window is 10 s;
// a case's requests take a fraction of a second.)
func TestBudget(t *testing.T) {
	cases := []struct {
		name      string
		succeeded int // successful requests made first
		failed    int // then these, at once, each failing with a claimed 500
		retried   int
	}{
		{name: "the floor", failed: 10, retried: 3},
		{name: "the ratio: 10 % of 80 requests", succeeded: 60, failed: 20, retried: 8},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			up := startUpstream(t)
			hold, held := make(chan struct{}), make(chan struct{}, c.failed)
			up.set("/budget", reply{status: 500, claims: []string{"claimed"}, hold: hold, held: held})
			s := startSidecar(t, up.addr, nil)
			for range c.succeeded {
				if res := get(t, s, "GET", "/ok", nil); res.StatusCode != http.StatusOK {
					t.Fatalf("/ok answered %d", res.StatusCode)
				}
			}

			statuses := make(chan int, c.failed)
			for range c.failed {
				go func() {
					res, err := http.Get(s.url + "/budget")
					if err != nil {
						statuses <- 0
						return
					}
					_, _ = io.Copy(io.Discard, res.Body)
					_ = res.Body.Close()
					statuses <- res.StatusCode
				}()
			}
			// Every request either comes back refused or has its retry
			// held at the upstream.
			refused, retried := 0, 0
			for refused+retried < c.failed {
				select {
				case st := <-statuses:
					refused++
					if st != http.StatusInternalServerError {
						t.Errorf("a refused retry answered %d, want the upstream's 500", st)
					}
				case <-held:
					retried++
				}
			}
			if retried != c.retried {
				t.Errorf("%d requests retried, want %d", retried, c.retried)
			}
			if got := s.stat(t, "cluster.upstream.upstream_rq_retry_overflow"); got != c.failed-c.retried {
				t.Errorf("upstream_rq_retry_overflow = %d, want %d", got, c.failed-c.retried)
			}
			close(hold)
			for range retried {
				if st := <-statuses; st != http.StatusInternalServerError {
					t.Errorf("a retried request answered %d, want the upstream's 500", st)
				}
			}
		})
	}
}
