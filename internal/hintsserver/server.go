// SPDX-License-Identifier: Apache-2.0

// Package hintsserver serves the ownership hints (docs/design.md §9.3):
// GET /v1/hints?service=NAME, from a view of an edge model, on a confighttp
// server, so that TLS and the collector's authenticator extensions apply.
// The errorownership_hints extension runs it.
package hintsserver

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.uber.org/zap"

	"github.com/errorownership/errorownership/internal/edges"
	"github.com/errorownership/errorownership/ownership"
)

// maxServiceName bounds the service parameter: service names are short,
// and the cache must not be filled with junk.
const maxServiceName = 255

// maxHeaderBytes bounds a request's line and headers (net/http allows 4 KiB
// more, then answers 431): a hints request is a short GET with a token,
// and net/http's 1 MiB default would let every connection hold that much
// before the authenticator has looked at it.
const maxHeaderBytes = 64 << 10

// Registry is what the errorownership_hints extension offers the
// errorownership processor that names it (hints_extension), which finds it
// among the host's extensions, as exporters find a storage extension.
type Registry interface {
	// ServeModelOf serves the model v of processor id until stop is
	// called; it fails if the extension serves another model.
	ServeModelOf(id component.ID, v edges.Viewer) (stop func(), err error)
}

// Server serves each service its hints from an edge model,
// encoding each service's answer once per view of the model.
type Server struct {
	http confighttp.ServerConfig
	// authParams are the query parameters confighttp hands the
	// authenticator (auth.request_params): the only ones besides service.
	authParams []string
	ttl        time.Duration
	budget     ownership.RetryBudget
	source     edges.Viewer // the model the hints are served from
	logger     *zap.Logger

	srv     *http.Server
	serving sync.WaitGroup

	connsMu sync.Mutex
	conns   map[net.Conn]http.ConnState // open connections, for Shutdown

	mu      sync.Mutex
	view    *edges.View // the view answers holds the answers of
	answers map[string]*answer
}

// answer is one service's encoded hints, with its header values ready, so
// that serving a cached answer allocates next to nothing.
type answer struct {
	body    []byte
	etag    string
	headers http.Header
}

// New returns a server listening as server says, telling services to use
// their hints for ttl and to keep budget.
func New(server confighttp.ServerConfig, ttl time.Duration, budget ownership.RetryBudget, source edges.Viewer, logger *zap.Logger) *Server {
	h := &Server{http: server, ttl: ttl, budget: budget, source: source, logger: logger}
	if auth := server.Auth.Get(); auth != nil {
		h.authParams = auth.RequestParameters
	}
	return h
}

// Start listens on the configured endpoint.
func (h *Server) Start(ctx context.Context, host component.Host, set component.TelemetrySettings) error {
	ln, err := h.http.ToListener(ctx)
	if err != nil {
		return fmt.Errorf("hints: cannot listen on %q: %w", h.http.NetAddr.Endpoint, err)
	}
	h.srv, err = h.http.ToServer(ctx, host.GetExtensions(), set, h, confighttp.WithErrorHandler(h.refuse))
	if err != nil {
		ln.Close()
		return fmt.Errorf("hints: %w", err)
	}
	h.srv.MaxHeaderBytes = maxHeaderBytes
	h.conns = make(map[net.Conn]http.ConnState)
	h.srv.ConnState = h.connState
	h.serving.Add(1)
	go func() {
		defer h.serving.Done()
		if err := h.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			h.logger.Error("The ownership hints server stopped", zap.Error(err))
		}
	}()
	h.logger.Info("Serving ownership hints", zap.String("endpoint", ln.Addr().String()), zap.String("path", ownership.HintsPath))
	return nil
}

// Shutdown stops the server and waits until every request in flight is
// answered, or ctx ends; then it closes the connections still open, which
// cancels their requests' contexts: a request waiting for a database that
// does not answer must not hold the collector's shutdown. Connections that
// are open but never sent a request are closed at once: net/http would
// wait up to five seconds for each, as long as the whole shutdown may take.
func (h *Server) Shutdown(ctx context.Context) error {
	if h.srv == nil {
		return nil
	}
	shut := make(chan error, 1)
	go func() { shut <- h.srv.Shutdown(ctx) }()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var err error
wait:
	for {
		select {
		case err = <-shut:
			break wait
		case <-tick.C:
			if !h.busy() {
				err = h.srv.Close()
				if shutErr := <-shut; shutErr != nil {
					// It says only that Close cut it short.
					h.logger.Debug("The hints server's graceful shutdown was cut short", zap.Error(shutErr))
				}
				break wait
			}
		}
	}
	if err != nil {
		err = errors.Join(fmt.Errorf("hints: requests still in flight at shutdown: %w", err), h.srv.Close())
	}
	h.serving.Wait()
	return err
}

// connState keeps track of the connections and their states.
func (h *Server) connState(c net.Conn, state http.ConnState) {
	h.connsMu.Lock()
	defer h.connsMu.Unlock()
	if state == http.StateClosed || state == http.StateHijacked {
		delete(h.conns, c)
	} else {
		h.conns[c] = state
	}
}

// busy reports whether a connection is serving a request.
func (h *Server) busy() bool {
	h.connsMu.Lock()
	defer h.connsMu.Unlock()
	for _, state := range h.conns {
		if state == http.StateActive {
			return true
		}
	}
	return false
}

// refuse answers what confighttp refuses before ServeHTTP is called — a
// request without valid credentials (401), a Content-Encoding it cannot
// decode (400) — with a fixed message: confighttp's own would show the
// authenticator's error text, or echo the request's header, to anyone.
func (h *Server) refuse(w http.ResponseWriter, _ *http.Request, reason string, code int) {
	h.logger.Debug("Refused an ownership hints request", zap.Int("status", code), zap.String("reason", reason))
	msg := "the request is malformed: a hints request is a GET without a body"
	if code == http.StatusUnauthorized {
		msg = "unauthorized: send the credentials the collector's authenticator for hints expects"
	}
	httpError(w, code, msg)
}

// ServeHTTP answers GET /v1/hints?service=NAME.
func (h *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != ownership.HintsPath {
		httpError(w, http.StatusNotFound, "no such path: hints are at "+ownership.HintsPath+"?service=NAME")
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		httpError(w, http.StatusMethodNotAllowed, "use GET")
		return
	}
	// The service name goes to the cache, the logs and the database: it
	// must be one short, printable UTF-8 string.
	service, problem := serviceParam(r.URL.RawQuery, h.authParams)
	switch {
	case problem != "":
		httpError(w, http.StatusBadRequest, problem+": ask for "+ownership.HintsPath+"?service=NAME")
		return
	case service == "":
		httpError(w, http.StatusBadRequest, "the service query parameter is missing: ask for "+ownership.HintsPath+"?service=NAME")
		return
	case len(service) > maxServiceName:
		httpError(w, http.StatusBadRequest, "the service query parameter is longer than "+strconv.Itoa(maxServiceName)+" bytes")
		return
	}
	ans, err := h.answer(r.Context(), service)
	if err != nil {
		// A model that cannot be read is logged where it is read, once an
		// outage; only what else goes wrong is logged here.
		if !errors.Is(err, edges.ErrNoModelYet) {
			h.logger.Warn("Cannot compute ownership hints", zap.String("service", service), zap.Error(err))
		}
		httpError(w, http.StatusServiceUnavailable, "the edge model cannot be read now; keep the last hints or the safe defaults")
		return
	}
	hdr := w.Header()
	hdr["Etag"] = ans.headers["Etag"]
	hdr["Cache-Control"] = ans.headers["Cache-Control"]
	hdr["X-Content-Type-Options"] = nosniff
	if etagMatches(r.Header["If-None-Match"], ans.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	hdr["Content-Type"] = ans.headers["Content-Type"]
	hdr["Content-Length"] = ans.headers["Content-Length"]
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(ans.body)
	}
}

// maxCachedAnswers bounds the answers kept for one view, so that requests
// for made-up service names cannot grow them: past it, answers are encoded
// anew.
const maxCachedAnswers = 10_000

// answer returns the service's hints from the current view of the model,
// encoded once per view.
func (h *Server) answer(ctx context.Context, service string) (*answer, error) {
	v, err := h.source.View(ctx)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	if h.view != v {
		h.view, h.answers = v, make(map[string]*answer)
	}
	ans := h.answers[service]
	h.mu.Unlock()
	if ans != nil {
		return ans, nil
	}
	if ans, err = h.encode(service, v.Edges(service), v.At); err != nil {
		return nil, err
	}
	h.mu.Lock()
	if h.view == v && len(h.answers) < maxCachedAnswers {
		h.answers[service] = ans
	}
	h.mu.Unlock()
	return ans, nil
}

func (h *Server) encode(service string, edges []ownership.HintEdge, at time.Time) (*answer, error) {
	doc := ownership.NewHints(service, edges, h.ttl, h.budget, time.Time{})
	// The ETag covers what a client acts on, not when it was computed, so
	// that unchanged hints answer 304 however often they are recomputed.
	stable, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(stable)
	doc.GeneratedAt = at.UTC()
	body, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	etag := `W/"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`
	return &answer{
		body: body,
		etag: etag,
		headers: http.Header{
			"Etag":           {etag},
			"Cache-Control":  {"max-age=" + strconv.Itoa(int(h.ttl/time.Second))},
			"Content-Type":   {"application/json"},
			"Content-Length": {strconv.Itoa(len(body))},
		},
	}, nil
}

// serviceParam finds the service parameter in a raw query string without
// building the map url.ParseQuery would. It returns a problem, to answer
// 400 with, for a parameter other than service and the authenticator's
// (authParams), a malformed escape, a service parameter given twice, or a
// name that is not valid UTF-8 or holds control characters (NUL, line
// breaks, terminal escapes): no service is called so, and such a name must
// reach neither the logs nor the database. The problems do not repeat what
// the request said.
func serviceParam(raw string, authParams []string) (service, problem string) {
	found := false
	for part := range strings.SplitSeq(raw, "&") {
		if part == "" {
			continue // "service=a&", as some clients build it
		}
		k, v, _ := strings.Cut(part, "=")
		k, ok := unescape(k)
		switch {
		case !ok:
			return "", "the query string is malformed"
		case k != "service" && slices.Contains(authParams, k):
			continue
		case k != "service":
			return "", "unknown query parameter: only service is accepted"
		}
		if found {
			return "", "the service query parameter is given more than once; ask for one service"
		}
		found = true
		if service, ok = unescape(v); !ok {
			return "", "the query string is malformed"
		}
	}
	switch {
	case !utf8.ValidString(service):
		return "", "the service query parameter is not valid UTF-8"
	case strings.ContainsFunc(service, unicode.IsControl):
		return "", "the service query parameter holds control characters"
	}
	return service, ""
}

// unescape decodes a query string key or value, sparing the common case
// that needs no decoding; ok is false for a malformed escape.
func unescape(s string) (string, bool) {
	if !strings.ContainsAny(s, "%+") {
		return s, true
	}
	u, err := url.QueryUnescape(s)
	return u, err == nil
}

// etagMatches implements If-None-Match's weak comparison.
func etagMatches(values []string, etag string) bool {
	for _, v := range values {
		for tag := range strings.SplitSeq(v, ",") {
			tag = strings.TrimSpace(tag)
			if tag == "*" || strings.TrimPrefix(tag, "W/") == strings.TrimPrefix(etag, "W/") {
				return true
			}
		}
	}
	return false
}

// nosniff stops a browser from reading a body as anything but JSON.
var nosniff = []string{"nosniff"}

// httpError answers code with msg, a fixed text that neither repeats the
// request nor tells what failed inside, in a JSON error no cache keeps.
func httpError(w http.ResponseWriter, code int, msg string) {
	hdr := w.Header()
	hdr.Set("Content-Type", "application/json")
	hdr["X-Content-Type-Options"] = nosniff
	hdr.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
