// SPDX-License-Identifier: Apache-2.0

// Package hooksgrpc puts error ownership into gRPC services: server
// interceptors that tell callers whether the service owns an error (the
// error-claim trailer, with grpc-retry-pushback-ms: -1 beside unclaimed),
// and client interceptors that retry only where the error began (the
// decision matrix of docs/design.md §4.3), within a retry budget.
//
// Setup, with hints from the collector (package hints):
//
//	h := hints.Start(ctx, "http://otel-collector:4320", "checkout")
//	srv := grpc.NewServer(
//		grpc.StatsHandler(otelgrpc.NewServerHandler()),
//		grpc.ChainUnaryInterceptor(hooksgrpc.UnaryServerInterceptor(hooksgrpc.WithHints(h))),
//		grpc.ChainStreamInterceptor(hooksgrpc.StreamServerInterceptor(hooksgrpc.WithHints(h))))
//	conn, err := grpc.NewClient(target,
//		grpc.WithStatsHandler(hooksgrpc.ClientHandler(otelgrpc.NewClientHandler())),
//		grpc.WithChainUnaryInterceptor(hooksgrpc.UnaryClientInterceptor(hooksgrpc.WithHints(h))),
//		grpc.WithChainStreamInterceptor(hooksgrpc.StreamClientInterceptor(hooksgrpc.WithHints(h))))
//
// The server interceptors run inside otelgrpc's server span and set
// error_ownership.claim.sent and error_ownership.claim.reason on it. The client interceptors retry
// by invoking again, so each attempt gets its own otelgrpc CLIENT span;
// ClientHandler lets the retry decision be taken while that span is still
// open, so it carries error_ownership.retry.attempt, error_ownership.claim.received and
// error_ownership.retry.decision. Handlers must make their outbound calls with the call's
// context, which carries the hooks.Ledger.
//
// Operations are named as otelgrpc names its spans and the analysis its
// edges: "pkg.Service/Method". A callee is named by the connection's target
// address, which the hints list for each edge beside the callee's
// service.name, so the hooks need no service names.
package hooksgrpc
