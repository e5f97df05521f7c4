// SPDX-License-Identifier: Apache-2.0

package hintsserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configauth"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/extension/extensionauth/extensionauthtest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/internal/edges"
	"github.com/errorownership/errorownership/ownership"
)

// marker is in every hostile part of the requests below: no answer may
// repeat it.
const marker = "Marker7q"

// secret is in the errors the failing source and authenticator return: no
// answer may show it.
const secret = "postgres://collector:hunter2@db.internal:5432/stats" //nolint:gosec // G101: a made-up password, to prove no answer shows it

// allowedHeaders are the response headers an answer may carry: net/http's
// own and the handler's, no Server or X-Powered-By.
var allowedHeaders = map[string]bool{
	"Allow": true, "Cache-Control": true, "Connection": true, "Content-Length": true,
	"Content-Type": true, "Date": true, "Etag": true, "X-Content-Type-Options": true,
}

// host is a collector host with the given extensions.
type host struct {
	component.Host
	extensions map[component.ID]component.Component
}

func (h host) GetExtensions() map[component.ID]component.Component { return h.extensions }

// failingSource fails every read with an error that names the database
// and its password, as a driver's error might: the one fault the real
// sources cannot be made to produce (the store's reports ErrNoModelYet).
type failingSource struct{}

func (failingSource) View(context.Context) (*edges.View, error) {
	return nil, fmt.Errorf("reading the edge model: dial %s: connection refused", secret)
}

// serve starts a Server on a loopback port with the processor's own
// (empty) model unless source is given, and returns its address.
func serve(t *testing.T, source edges.Viewer, cfg confighttp.ServerConfig, extensions map[component.ID]component.Component) string {
	t.Helper()
	if source == nil {
		source = edges.NewOwn(dependencyanalysis.NewEdgeModel(dependencyanalysis.DefaultConfig().EdgeModel),
			dependencyanalysis.NewSymbols(1<<10), new(sync.RWMutex))
	}
	cfg.NetAddr.Endpoint = "127.0.0.1:0"
	core, logs := observer.New(zap.InfoLevel)
	s := New(cfg, 30*time.Second, ownership.DefaultRetryBudget(), source, zap.New(core))
	require.NoError(t, s.Start(context.Background(), host{componenttest.NewNopHost(), extensions}, componenttest.NewNopTelemetrySettings()))
	t.Cleanup(func() { require.NoError(t, s.Shutdown(context.Background())) })
	started := logs.FilterMessage("Serving ownership hints").All()
	require.Len(t, started, 1)
	return started[0].ContextMap()["endpoint"].(string)
}

// roundTrip writes raw, one HTTP/1.1 request exactly as given, and reads
// the answer.
func roundTrip(t *testing.T, addr, raw string) (*http.Response, string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(time.Minute)))
	_, err = io.WriteString(conn, raw)
	require.NoError(t, err)
	method, _, _ := strings.Cut(raw, " ")
	res, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: method})
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res, string(body)
}

// get is a raw GET of target with the given header lines.
func get(target string, headers ...string) string {
	return "GET " + target + " HTTP/1.1\r\nHost: hints\r\n" + strings.Join(append(headers, ""), "\r\n") + "\r\n"
}

// checkRevealsNothing fails unless the answer repeats nothing hostile of
// the request, shows no internal error, and carries only allowedHeaders.
func checkRevealsNothing(t *testing.T, res *http.Response, body string) {
	t.Helper()
	for _, leak := range []string{marker, secret, "hunter2", "db.internal", "goroutine", ".go:", "panic", "dial", "gzip", "Content-Encoding", "<script"} {
		assert.NotContains(t, strings.ToLower(body), strings.ToLower(leak), "the body reveals %q", leak)
	}
	for name := range res.Header {
		assert.True(t, allowedHeaders[name], "the answer carries the header %s: %q", name, res.Header.Get(name))
	}
	if res.StatusCode >= 400 && res.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		// net/http answers 431 itself, in plain text; every other refusal
		// is the handler's JSON, which no browser sniffs or cache keeps.
		assert.Equal(t, "application/json", res.Header.Get("Content-Type"))
		assert.Equal(t, "nosniff", res.Header.Get("X-Content-Type-Options"))
		assert.Equal(t, "no-store", res.Header.Get("Cache-Control"))
	}
}

// TestHostileRequests: every request but a well-formed GET of one service's
// hints is refused with a 4xx before the model is read, and no answer
// repeats the request or reveals what failed inside.
func TestHostileRequests(t *testing.T) {
	addr := serve(t, nil, confighttp.NewDefaultServerConfig(), nil)
	big := strings.Repeat("a", 100<<10) // over maxHeaderBytes and net/http's slack
	tests := []struct {
		name string
		raw  string
		code int
		says string // a fragment of the JSON error; "" for none
	}{
		{"well formed (the control)", get("/v1/hints?service=checkout"), http.StatusOK, ""},
		{"HEAD", "HEAD /v1/hints?service=checkout HTTP/1.1\r\nHost: hints\r\n\r\n", http.StatusOK, ""},
		{"trailing ampersand", get("/v1/hints?service=checkout&"), http.StatusOK, ""},

		{"no service", get("/v1/hints"), http.StatusBadRequest, "service query parameter is missing"},
		{"service over 255 bytes", get("/v1/hints?service=" + strings.Repeat(marker, 40)), http.StatusBadRequest, "longer than 255 bytes"},
		{"60 KiB query string", get("/v1/hints?service=checkout&" + marker + "=" + strings.Repeat("a", 60<<10)), http.StatusBadRequest, "unknown query parameter"},
		{"URL over 64 KiB", get("/v1/hints?service=checkout&" + marker + "=" + big), http.StatusRequestHeaderFieldsTooLarge, ""},
		{"header over 64 KiB", get("/v1/hints?service=checkout", "X-"+marker+": "+big), http.StatusRequestHeaderFieldsTooLarge, ""},
		{"headers over 64 KiB in all", get("/v1/hints?service=checkout", strings.Repeat("X-"+marker+": "+strings.Repeat("a", 1000)+"\r\n", 80)+"X-Last: 1"), http.StatusRequestHeaderFieldsTooLarge, ""},

		{"malformed escape in service", get("/v1/hints?service=" + marker + "%zz"), http.StatusBadRequest, "malformed"},
		{"malformed escape in a key", get("/v1/hints?service=checkout&" + marker + "%zz=1"), http.StatusBadRequest, "malformed"},
		{"line break in service", get("/v1/hints?service=" + marker + "%0D%0ASet-Cookie:%20a=b"), http.StatusBadRequest, "control characters"},
		{"NUL in service", get("/v1/hints?service=" + marker + "%00"), http.StatusBadRequest, "control characters"},
		{"invalid UTF-8 in service", get("/v1/hints?service=" + marker + "%ff"), http.StatusBadRequest, "not valid UTF-8"},
		{"service twice", get("/v1/hints?service=checkout&service=" + marker), http.StatusBadRequest, "more than once"},
		{"script in service", get("/v1/hints?service=%3Cscript%3Ealert(1)%3C%2Fscript%3E"), http.StatusOK, `\u003cscript\u003e`},

		{"unknown parameter", get("/v1/hints?service=checkout&" + marker + "=1"), http.StatusBadRequest, "unknown query parameter"},
		{"unknown parameter alone", get("/v1/hints?" + marker), http.StatusBadRequest, "unknown query parameter"},
		{"empty key", get("/v1/hints?=" + marker + "&service=checkout"), http.StatusBadRequest, "unknown query parameter"},
		{"auth parameter without auth", get("/v1/hints?service=checkout&token=" + marker), http.StatusBadRequest, "unknown query parameter"},

		{"POST", "POST /v1/hints?service=checkout HTTP/1.1\r\nHost: hints\r\nContent-Length: 8\r\n\r\n" + marker, http.StatusMethodNotAllowed, "use GET"},
		{"PUT", "PUT /v1/hints?service=checkout HTTP/1.1\r\nHost: hints\r\nContent-Length: 0\r\n\r\n", http.StatusMethodNotAllowed, "use GET"},
		{"DELETE", "DELETE /v1/hints?service=checkout HTTP/1.1\r\nHost: hints\r\n\r\n", http.StatusMethodNotAllowed, "use GET"},
		{"OPTIONS", "OPTIONS /v1/hints?service=checkout HTTP/1.1\r\nHost: hints\r\n\r\n", http.StatusMethodNotAllowed, "use GET"},
		{"TRACE", "TRACE /v1/hints?service=checkout HTTP/1.1\r\nHost: hints\r\nX-" + marker + ": 1\r\n\r\n", http.StatusMethodNotAllowed, "use GET"},
		{"made-up method", marker + " /v1/hints?service=checkout HTTP/1.1\r\nHost: hints\r\n\r\n", http.StatusMethodNotAllowed, "use GET"},
		{"CONNECT", "CONNECT 127.0.0.1:5432 HTTP/1.1\r\nHost: 127.0.0.1:5432\r\n\r\n", http.StatusNotFound, "no such path"},

		{"dot segments", get("/v1/hints/../../etc/passwd?service=checkout"), http.StatusNotFound, "no such path"},
		{"escaped dot segments", get("/v1/hints/..%2f..%2fetc%2fpasswd?service=checkout"), http.StatusNotFound, "no such path"},
		{"escaped slash after the path", get("/v1/hints%2f..%2f" + marker + "?service=checkout"), http.StatusNotFound, "no such path"},
		{"dot segments before the path", get("/" + marker + "/../v1/hints?service=checkout"), http.StatusNotFound, "no such path"},
		{"double slash", get("//v1/hints?service=checkout"), http.StatusNotFound, "no such path"},
		{"trailing slash", get("/v1/hints/?service=checkout"), http.StatusNotFound, "no such path"},
		{"backslashes", get(`/v1\hints?service=checkout`), http.StatusNotFound, "no such path"},

		{"unknown Content-Encoding", get("/v1/hints?service=checkout", "Content-Encoding: "+marker), http.StatusBadRequest, "a GET without a body"},
		{"gzip that is not", get("/v1/hints?service=checkout", "Content-Encoding: gzip", "Content-Length: 8") + marker, http.StatusBadRequest, "a GET without a body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, body := roundTrip(t, addr, tt.raw)
			assert.Equal(t, tt.code, res.StatusCode, "%s", body)
			if tt.says != "" {
				assert.Contains(t, body, tt.says)
			}
			checkRevealsNothing(t, res, body)
		})
	}
}

// TestRefusalsRevealNothingInternal: what fails inside the server — the
// model unreadable, the authenticator refusing — is answered with a fixed
// status and text that say nothing of why.
func TestRefusalsRevealNothingInternal(t *testing.T) {
	authID := component.MustNewID("hintsauth")
	withAuth := func(params ...string) confighttp.ServerConfig {
		cfg := confighttp.NewDefaultServerConfig()
		cfg.Auth = configoptional.Some(confighttp.AuthConfig{Config: configauth.Config{AuthenticatorID: authID}, RequestParameters: params})
		return cfg
	}
	tests := []struct {
		name   string
		source edges.Viewer
		cfg    confighttp.ServerConfig
		auth   component.Component
		target string
		code   int
		says   string
	}{
		{
			name:   "the model cannot be read",
			source: failingSource{},
			cfg:    confighttp.NewDefaultServerConfig(),
			target: "/v1/hints?service=checkout",
			code:   http.StatusServiceUnavailable,
			says:   "the edge model cannot be read now",
		},
		{
			name:   "the authenticator refuses",
			cfg:    withAuth(),
			auth:   extensionauthtest.NewErr(errors.New("token of tenant acme expired; " + secret)),
			target: "/v1/hints?service=checkout",
			code:   http.StatusUnauthorized,
			says:   "unauthorized",
		},
		{
			name:   "the authenticator refuses a hostile request first",
			cfg:    withAuth(),
			auth:   extensionauthtest.NewErr(errors.New(secret)),
			target: "/v1/hints/../" + marker + "?" + marker + "%zz",
			code:   http.StatusUnauthorized,
			says:   "unauthorized",
		},
		{
			name:   "the authenticator's query parameter",
			cfg:    withAuth("token"),
			auth:   extensionauthtest.NewNopServer(),
			target: "/v1/hints?service=checkout&token=" + marker,
			code:   http.StatusOK,
		},
		{
			name:   "another parameter beside the authenticator's",
			cfg:    withAuth("token"),
			auth:   extensionauthtest.NewNopServer(),
			target: "/v1/hints?service=checkout&token=a&" + marker + "=1",
			code:   http.StatusBadRequest,
			says:   "unknown query parameter",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ext map[component.ID]component.Component
			if tt.auth != nil {
				ext = map[component.ID]component.Component{authID: tt.auth}
			}
			addr := serve(t, tt.source, tt.cfg, ext)
			res, body := roundTrip(t, addr, get(tt.target))
			assert.Equal(t, tt.code, res.StatusCode, "%s", body)
			assert.Contains(t, body, tt.says)
			checkRevealsNothing(t, res, body)
		})
	}
}
