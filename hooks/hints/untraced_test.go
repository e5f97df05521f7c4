// SPDX-License-Identifier: Apache-2.0

package hints

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestPollsUntracedUnderATracedDefaultTransport: a service that traces
// every call by wrapping http.DefaultTransport in otelhttp's must not trace
// the hint client's polls, each of which would be a trace of its own. (Not
// parallel: it replaces http.DefaultTransport.)
func TestPollsUntracedUnderATracedDefaultTransport(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, sample)
	}))
	defer srv.Close()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	orig := http.DefaultTransport
	http.DefaultTransport = otelhttp.NewTransport(orig, otelhttp.WithTracerProvider(tp))
	defer func() { http.DefaultTransport = orig }()

	tests := []struct {
		name  string
		call  func() error
		spans int
	}{
		{name: "a plain http.Get is traced (the control)", spans: 1, call: func() error {
			res, err := http.Get(srv.URL) //nolint:noctx // the control: what a service's own call does
			if err == nil {
				res.Body.Close()
			}
			return err
		}},
		{name: "a poll is not", spans: 0, call: func() error {
			_, err := New(srv.URL, "checkout").Refresh(context.Background())
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(spans.Ended())
			if err := tt.call(); err != nil {
				t.Fatal(err)
			}
			if got := len(spans.Ended()) - before; got != tt.spans {
				t.Errorf("%d spans, want %d", got, tt.spans)
			}
		})
	}
}
