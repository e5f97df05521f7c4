// SPDX-License-Identifier: Apache-2.0

// Command gateway is the Go service of the polyglot chain (README.md in the
// directory above): otelhttp with the errorownership hooks, set up as the
// hooks' README says, calling the Java service.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/errorownership/errorownership/hooks/hints"
	"github.com/errorownership/errorownership/hooks/hookshttp"
	"github.com/errorownership/errorownership/ownership"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		log.Fatalf("gateway: %v", err)
	}
}

// counters are what the service knows it did.
type counters struct {
	mu                                    sync.Mutex
	rate                                  float64
	Served, Own, Propagated, Coincidental int64
}

func (c *counters) fails(service, item, attempt string) bool {
	if attempt == "" {
		attempt = "0"
	}
	h := fnv.New32a()
	_, _ = io.WriteString(h, item+"/"+service+"/"+attempt)
	c.mu.Lock()
	defer c.mu.Unlock()
	return float64(h.Sum32())/math.Exp2(32) < c.rate
}

func run(ctx context.Context) error {
	service := os.Getenv("OTEL_SERVICE_NAME")
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }() // exports what is left
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})

	h := hints.Start(ctx, os.Getenv("HINTS_URL"), service)
	client := &http.Client{Transport: hookshttp.Transport(otelhttp.NewTransport(http.DefaultTransport), hookshttp.WithHints(h))}
	next := os.Getenv("NEXT")
	c := &counters{}
	if r := os.Getenv("RATE"); r != "" {
		if c.rate, err = strconv.ParseFloat(r, 64); err != nil {
			return err
		}
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/{id}", func(w http.ResponseWriter, r *http.Request) {
		item := r.PathValue("id")
		c.mu.Lock()
		c.Served++
		c.mu.Unlock()
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, next+"/"+item, nil) //nolint:gosec // G704: NEXT is the chain's next service, from this process's environment
		res, err := client.Do(req)                                                            //nolint:gosec // G704: as above
		if err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
		if err != nil || res.StatusCode >= 500 {
			c.mu.Lock()
			c.Propagated++
			c.mu.Unlock()
			http.Error(w, "orders failed", http.StatusBadGateway)
			return
		}
		if c.fails(service, item, r.Header.Get(ownership.HTTPRetryAttemptHeader)) {
			c.mu.Lock()
			c.Own++
			c.mu.Unlock()
			http.Error(w, "gateway failed", http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	admin := http.NewServeMux()
	admin.HandleFunc("POST /admin/rate", func(w http.ResponseWriter, r *http.Request) {
		v, err := strconv.ParseFloat(r.URL.Query().Get("value"), 64)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		c.rate = v
		c.mu.Unlock()
	})
	admin.HandleFunc("GET /admin/counters", func(w http.ResponseWriter, _ *http.Request) {
		c.mu.Lock()
		defer c.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]int64{"served": c.Served, "own": c.Own, "propagated": c.Propagated, "coincidental": c.Coincidental})
	})
	root := http.NewServeMux()
	root.Handle("/admin/", admin)
	root.Handle("/", otelhttp.NewHandler(hookshttp.Middleware(mux, hookshttp.WithHints(h)), service))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Println(ln.Addr().String()) // the test reads where the service listens
	srv := &http.Server{Handler: root, ReadHeaderTimeout: 10 * time.Second}
	go func() { <-ctx.Done(); _ = srv.Shutdown(context.WithoutCancel(ctx)) }()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
