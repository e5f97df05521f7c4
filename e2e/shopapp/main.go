// SPDX-License-Identifier: Apache-2.0

// Command shopapp is one service of a small shop, wired for error ownership
// exactly as the README's setup tells users: the OpenTelemetry Go SDK
// exporting OTLP, otelhttp and otelgrpc, the hooks and the hint client, and
// nothing else. The end-to-end tests run four of them as separate processes
// against the built collector:
//
//	frontend (HTTP) → checkout (HTTP) → recommendations (gRPC; checkout tolerates its failures)
//	                                  → payments (HTTP; checkout fails when it does)
//
// Each service fails on its own at the rate -fault, and writes what it knows
// of every request it served (its own fault, the calls that failed, the
// claim it sent) to -truth as JSON lines: the ground truth the collector's
// verdicts are checked against. The frontend answers the driver with the
// trace ID in the Shop-Trace-Id header.
//
// The tracing is configured by the standard environment variables
// (OTEL_SERVICE_NAME, OTEL_EXPORTER_OTLP_ENDPOINT …).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/errorownership/errorownership/e2e/shopapp/truth"
	"github.com/errorownership/errorownership/hooks/hints"
	"github.com/errorownership/errorownership/hooks/hooksgrpc"
	"github.com/errorownership/errorownership/hooks/hookshttp"
	"github.com/errorownership/errorownership/ownership"
)

// listMethod is the recommendations service's one method.
const listMethod = "/shop.Recommendations/List"

func main() {
	role := flag.String("role", "", "frontend, checkout, payments or recommendations")
	listen := flag.String("listen", "127.0.0.1:0", "address to serve on")
	hintsURL := flag.String("hints", "", "the collector's ownership hints endpoint")
	checkoutURL := flag.String("checkout", "", "frontend: checkout's base URL")
	paymentsURL := flag.String("payments", "", "checkout: payments' base URL")
	recsTarget := flag.String("recommendations", "", "checkout: recommendations' gRPC target")
	fault := flag.Float64("fault", 0, "rate at which the service fails on its own")
	seed := flag.Uint64("seed", 1, "seed of the fault injection")
	truthFile := flag.String("truth", "", "where to write the truth, one JSON line per request")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *role, *listen, *hintsURL, *checkoutURL, *paymentsURL, *recsTarget, *fault, *seed, *truthFile); err != nil {
		log.Fatalf("shopapp %s: %v", *role, err)
	}
}

func run(ctx context.Context, role, listen, hintsURL, checkoutURL, paymentsURL, recsTarget string, fault float64, seed uint64, truthFile string) error {
	// The README's setup, step 1: tracing, as for any OpenTelemetry Go service.
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }() // exports what is left
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})

	// Step 2: the hints, for the service's own service.name.
	h := hints.Start(ctx, hintsURL, os.Getenv("OTEL_SERVICE_NAME"))

	s := &shop{faults: rand.New(rand.NewPCG(seed, 7)), rate: fault} //nolint:gosec // G404: seeded faults, so that a run can be repeated
	if truthFile != "" {
		f, err := os.OpenFile(truthFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644) //nolint:gosec // G304: the file the test named with the truth flag
		if err != nil {
			return err
		}
		defer f.Close()
		s.out = json.NewEncoder(f)
	}

	// Step 3: the hooks on every client and server.
	s.http = &http.Client{Transport: hookshttp.Transport(otelhttp.NewTransport(http.DefaultTransport), hookshttp.WithHints(h))}
	if recsTarget != "" {
		conn, err := grpc.NewClient(recsTarget,
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithStatsHandler(hooksgrpc.ClientHandler(otelgrpc.NewClientHandler())),
			grpc.WithChainUnaryInterceptor(hooksgrpc.UnaryClientInterceptor(hooksgrpc.WithHints(h))))
		if err != nil {
			return err
		}
		defer conn.Close()
		s.recs = conn
	}

	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	fmt.Println(ln.Addr().String()) // the test reads where the service listens
	if role == "recommendations" {
		srv := grpc.NewServer(
			grpc.StatsHandler(otelgrpc.NewServerHandler()),
			grpc.ChainUnaryInterceptor(hooksgrpc.UnaryServerInterceptor(hooksgrpc.WithHints(h))))
		srv.RegisterService(&recommendationsDesc, s)
		go func() { <-ctx.Done(); srv.GracefulStop() }()
		return srv.Serve(ln)
	}

	mux := http.NewServeMux()
	switch role {
	case "frontend":
		mux.HandleFunc("GET /shop/{id}", func(w http.ResponseWriter, r *http.Request) { s.frontend(w, r, checkoutURL) })
	case "checkout":
		mux.HandleFunc("GET /checkout/{id}", func(w http.ResponseWriter, r *http.Request) { s.checkout(w, r, paymentsURL) })
	case "payments":
		mux.HandleFunc("GET /payments/{id}", s.payments)
	default:
		return fmt.Errorf("unknown role %q", role)
	}
	srv := &http.Server{
		Handler:           otelhttp.NewHandler(hookshttp.Middleware(mux, hookshttp.WithHints(h)), role),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { <-ctx.Done(); _ = srv.Shutdown(context.WithoutCancel(ctx)) }()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

type shop struct {
	http *http.Client
	recs *grpc.ClientConn

	mu     sync.Mutex
	faults *rand.Rand
	rate   float64
	out    *json.Encoder
}

// ownFault draws whether this request fails on its own.
func (s *shop) ownFault() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults.Float64() < s.rate
}

func (s *shop) record(ctx context.Context, rec truth.Record) {
	sc := trace.SpanContextFromContext(ctx)
	rec.TraceID, rec.SpanID = sc.TraceID().String(), sc.SpanID().String()
	if s.out == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = s.out.Encode(rec)
}

// get calls url with the request's context and reports whether it failed.
func (s *shop) get(ctx context.Context, url string) (*http.Response, bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil) //nolint:gosec // G704: url is a fellow shop service's, from this process's flags
	if err != nil {
		return nil, true
	}
	res, err := s.http.Do(req) //nolint:gosec // G704: as for the request: a fellow shop service's URL
	if err != nil {
		return nil, true
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res, res.StatusCode >= 500
}

func (s *shop) frontend(w http.ResponseWriter, r *http.Request, checkoutURL string) {
	w.Header().Set(truth.TraceHeader, trace.SpanContextFromContext(r.Context()).TraceID().String())
	rec := truth.Record{Status: http.StatusOK}
	if _, failed := s.get(r.Context(), checkoutURL+"/checkout/"+r.PathValue("id")); failed {
		rec.Failed, rec.Status = []string{"checkout"}, http.StatusBadGateway
	} else if s.ownFault() {
		rec.Own, rec.Status = true, http.StatusInternalServerError
	}
	w.WriteHeader(rec.Status)
	rec.Claim = w.Header().Get(ownership.HTTPClaimHeader)
	s.record(r.Context(), rec)
}

// checkout asks recommendations for suggestions and carries on without
// them if it must, then charges through payments, without which it fails.
func (s *shop) checkout(w http.ResponseWriter, r *http.Request, paymentsURL string) {
	ctx := r.Context()
	rec := truth.Record{Status: http.StatusOK}
	if err := s.recs.Invoke(ctx, listMethod, wrapperspb.String(r.PathValue("id")), new(wrapperspb.StringValue)); err != nil {
		rec.Failed = append(rec.Failed, "recommendations")
	}
	if _, failed := s.get(ctx, paymentsURL+"/payments/"+r.PathValue("id")); failed {
		rec.Failed, rec.Status = append(rec.Failed, "payments"), http.StatusBadGateway
	} else if s.ownFault() {
		rec.Own, rec.Status = true, http.StatusInternalServerError
	}
	w.WriteHeader(rec.Status)
	// The middleware decided the claim as the status was written.
	rec.Claim = w.Header().Get(ownership.HTTPClaimHeader)
	s.record(ctx, rec)
}

func (s *shop) payments(w http.ResponseWriter, r *http.Request) {
	rec := truth.Record{Status: http.StatusOK}
	if s.ownFault() {
		rec.Own, rec.Status = true, http.StatusInternalServerError
	}
	w.WriteHeader(rec.Status)
	rec.Claim = w.Header().Get(ownership.HTTPClaimHeader)
	s.record(r.Context(), rec)
}

func (s *shop) list(ctx context.Context, in *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	if s.ownFault() {
		s.record(ctx, truth.Record{Own: true, Status: int(codes.Internal)})
		return nil, status.Error(codes.Internal, "no recommendations today")
	}
	s.record(ctx, truth.Record{Status: int(codes.OK)})
	return wrapperspb.String("recommended for " + in.GetValue()), nil
}

// recommendationsDesc registers shop.Recommendations/List by hand, so that
// the test app needs no generated code.
var recommendationsDesc = grpc.ServiceDesc{
	ServiceName: "shop.Recommendations",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "List",
		Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			s := srv.(*shop)
			if interceptor == nil {
				return s.list(ctx, in)
			}
			info := &grpc.UnaryServerInfo{Server: srv, FullMethod: listMethod}
			return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
				return s.list(ctx, req.(*wrapperspb.StringValue))
			})
		},
	}},
}
