// SPDX-License-Identifier: Apache-2.0

// Command newcomer is the Go service of the newcomer test
// (../../newcomer_test.go): otelhttp with the errorownership hooks, set up as
// hooks/README.md says, started as front, must and may.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/errorownership/errorownership/hooks/hints"
	"github.com/errorownership/errorownership/hooks/hookshttp"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		log.Fatalf("newcomer: %v", err)
	}
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
	// call reports whether a GET of base/work/{id}?fail=… failed; no base,
	// no call.
	call := func(r *http.Request, base string) bool {
		if base == "" {
			return false
		}
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, base+"/work/"+r.PathValue("id")+"?fail="+r.URL.Query().Get("fail"), nil) //nolint:gosec // G704: MUST_URL and MAY_URL come from this process's environment
		res, err := client.Do(req)                                                                                                                 //nolint:gosec // G704: as above
		if err != nil {
			return true
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode >= 300
	}
	mustURL, mayURL := os.Getenv("MUST_URL"), os.Getenv("MAY_URL")
	mux := http.NewServeMux()
	mux.HandleFunc("GET /work/{id}", func(w http.ResponseWriter, r *http.Request) {
		mustFailed := call(r, mustURL)
		call(r, mayURL) // tolerated
		switch {
		case slices.Contains(strings.Split(r.URL.Query().Get("fail"), ","), service):
			status := http.StatusInternalServerError
			if mustURL == "" && mayURL == "" {
				status = http.StatusServiceUnavailable
			}
			http.Error(w, service+" failed", status)
		case mustFailed:
			http.Error(w, "must failed", http.StatusBadGateway)
		default:
			fmt.Fprintln(w, "ok")
		}
	})
	handler := otelhttp.NewHandler(hookshttp.Middleware(mux, hookshttp.WithHints(h)), service)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Println(ln.Addr().String()) // the test reads where the service listens
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() { <-ctx.Done(); _ = srv.Shutdown(context.WithoutCancel(ctx)) }()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
