package errorownershipprocessor // import "github.com/errorownership/errorownership/processor/errorownershipprocessor"

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.uber.org/zap"

	"github.com/errorownership/errorownership/ownership"
)

// HintsConfig configures the ownership hints endpoint, GET /v1/hints?service=NAME.
type HintsConfig struct {
	// ServerConfig is the HTTP server: endpoint, TLS, auth (the collector's
	// authenticator extensions), CORS… An empty endpoint turns hints off.
	confighttp.ServerConfig `mapstructure:",squash"`
	// TTL is how long a service may use the hints before it asks again
	// (the body's ttl_seconds and Cache-Control max-age).
	TTL time.Duration `mapstructure:"ttl"`
	// Refresh is how long the processor reuses the hints it computed for a
	// service, so that a thousand callers cost one model read a second.
	Refresh time.Duration `mapstructure:"refresh"`
	// RetryBudget is the budget every service is told to keep.
	RetryBudget ownership.RetryBudget `mapstructure:"retry_budget"`
}

func defaultHintsConfig() HintsConfig {
	server := confighttp.NewDefaultServerConfig()
	server.NetAddr.Endpoint = "" // off until asked for: a processor opens no port by surprise
	return HintsConfig{
		ServerConfig: server,
		TTL:          30 * time.Second,
		Refresh:      time.Second,
		RetryBudget:  ownership.DefaultRetryBudget(),
	}
}

// validate reports the problems of the hints section, each naming its key.
// It is not Validate so that the collector, which walks the configuration
// calling every Validate, does not report them twice: Config.Validate does.
func (c *HintsConfig) validate() error {
	var errs []error
	if c.TTL < minHintsTTL {
		errs = append(errs, tooShort("hints.ttl", c.TTL, minHintsTTL, "30s"))
	}
	if c.Refresh < minHintsRefresh {
		errs = append(errs, tooShort("hints.refresh", c.Refresh, minHintsRefresh, "1s"))
	} else if c.Refresh > c.TTL {
		errs = append(errs, fmt.Errorf("hints.refresh: %v must be at most hints.ttl (%v), such as 1s", c.Refresh, c.TTL))
	}
	if r := c.RetryBudget.Ratio; !(r >= 0 && r <= 1) {
		errs = append(errs, fmt.Errorf("hints.retry_budget.ratio: %v must be between 0 and 1, such as 0.1", r))
	}
	if m := c.RetryBudget.MinRetriesPerSecond; !(m >= 0) {
		errs = append(errs, fmt.Errorf("hints.retry_budget.min_retries_per_second: %v must not be negative", m))
	}
	return errors.Join(errs...)
}

// maxServiceName bounds the service parameter: service names are short,
// and the cache must not be filled with junk.
const maxServiceName = 255

// hintsServer serves each service its hints from the processor's edge
// model, as one view of it answers them all.
type hintsServer struct {
	cfg    HintsConfig
	model  edgeModel
	logger *zap.Logger

	srv     *http.Server
	serving sync.WaitGroup
}

// hintsAnswer is one service's encoded hints, with its header values
// ready, so that serving a cached answer allocates next to nothing.
type hintsAnswer struct {
	body    []byte
	etag    string
	headers http.Header
}

func newHintsServer(cfg HintsConfig, model edgeModel, logger *zap.Logger) *hintsServer {
	return &hintsServer{cfg: cfg, model: model, logger: logger}
}

// start listens on the configured endpoint.
func (h *hintsServer) start(ctx context.Context, host component.Host, set component.TelemetrySettings) error {
	ln, err := h.cfg.ToListener(ctx)
	if err != nil {
		return fmt.Errorf("hints: cannot listen on %q: %w", h.cfg.NetAddr.Endpoint, err)
	}
	h.srv, err = h.cfg.ToServer(ctx, host.GetExtensions(), set, h)
	if err != nil {
		ln.Close()
		return fmt.Errorf("hints: %w", err)
	}
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

// shutdown stops the server and waits for it until ctx ends, then closes
// the connections still open, which cancels their requests' contexts: a
// request waiting for a database that does not answer must not hold the
// processor's shutdown.
func (h *hintsServer) shutdown(ctx context.Context) error {
	if h.srv == nil {
		return nil
	}
	err := h.srv.Shutdown(ctx)
	if err != nil {
		err = errors.Join(fmt.Errorf("hints: requests still in flight at shutdown: %w", err), h.srv.Close())
	}
	h.serving.Wait()
	return err
}

// ServeHTTP answers GET /v1/hints?service=NAME.
func (h *hintsServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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
	service, problem := serviceParam(r.URL.RawQuery)
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
		if !errors.Is(err, errNoModelYet) {
			h.logger.Warn("Cannot compute ownership hints", zap.String("service", service), zap.Error(err))
		}
		httpError(w, http.StatusServiceUnavailable, "the edge model cannot be read now; keep the last hints or the safe defaults")
		return
	}
	hdr := w.Header()
	hdr["Etag"] = ans.headers["Etag"]
	hdr["Cache-Control"] = ans.headers["Cache-Control"]
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

// answer returns the service's hints from the current view of the model.
func (h *hintsServer) answer(ctx context.Context, service string) (*hintsAnswer, error) {
	v, err := h.model.view(ctx)
	if err != nil {
		return nil, err
	}
	return v.answer(service, h.encode)
}

func (h *hintsServer) encode(service string, edges []ownership.HintEdge, at time.Time) (*hintsAnswer, error) {
	if edges == nil {
		edges = []ownership.HintEdge{}
	}
	doc := ownership.Hints{
		Version:     ownership.HintsVersion,
		Service:     service,
		TTLSeconds:  int(h.cfg.TTL / time.Second),
		RetryBudget: &h.cfg.RetryBudget,
		Edges:       edges,
	}
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
	return &hintsAnswer{
		body: body,
		etag: etag,
		headers: http.Header{
			"Etag":           {etag},
			"Cache-Control":  {"max-age=" + strconv.Itoa(int(h.cfg.TTL/time.Second))},
			"Content-Type":   {"application/json"},
			"Content-Length": {strconv.Itoa(len(body))},
		},
	}, nil
}

// serviceParam finds the service parameter in a raw query string without
// building the map url.ParseQuery would. It returns a problem, to answer
// 400 with, for a service parameter given twice, a malformed escape in it,
// or a name that is not valid UTF-8 or holds control characters (NUL, line
// breaks, terminal escapes): no service is called so, and such a name must
// reach neither the logs nor the database.
func serviceParam(raw string) (service, problem string) {
	found := false
	for part := range strings.SplitSeq(raw, "&") {
		k, v, _ := strings.Cut(part, "=")
		// Other parameters are not ours to judge, even malformed ones.
		if k, ok := unescape(k); !ok || k != "service" {
			continue
		}
		if found {
			return "", "the service query parameter is given more than once; ask for one service"
		}
		found = true
		var ok bool
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

func httpError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
