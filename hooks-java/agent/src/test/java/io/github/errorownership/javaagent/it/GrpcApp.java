// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.javaagent.it;

import io.github.errorownership.hooks.testing.GrpcTesting;
import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.Server;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.ClientCalls;
import io.opentelemetry.api.GlobalOpenTelemetry;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.context.Scope;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import org.eclipse.jetty.util.ajax.JSON;

/**
 * VectorApp's gRPC half, under the agent with nothing of the hooks: {@code grpc-client FILE
 * INDEX:PORT...} calls each case's callee (the runner's, on 127.0.0.1:PORT) once, one root span per
 * case; {@code grpc-serve FILE INDEX=PORT,PORT...} serves grpc.json's server cases, the request
 * naming the case, each call through a channel built as usual, and prints {@code PORT <port>} until
 * its standard input closes.
 */
final class GrpcApp {
  private GrpcApp() {}

  static void run(String[] args) throws Exception {
    Map<?, ?> doc = (Map<?, ?>) new JSON().fromJSON(Files.readString(Path.of(args[1])));
    if (args[0].equals("grpc-client")) {
      for (int i = 2; i < args.length; i++) {
        int colon = args[i].indexOf(':');
        client(
            Integer.parseInt(args[i].substring(0, colon)),
            Integer.parseInt(args[i].substring(colon + 1)));
      }
      return;
    }
    Object[] cases = (Object[]) ((Map<?, ?>) doc.get("server")).get("cases");
    Map<Integer, int[]> calls = new ConcurrentHashMap<>();
    for (int i = 2; i < args.length; i++) {
      int eq = args[i].indexOf('=');
      String ports = args[i].substring(eq + 1);
      calls.put(
          Integer.parseInt(args[i].substring(0, eq)),
          ports.isEmpty()
              ? new int[0]
              : java.util.Arrays.stream(ports.split(",", -1))
                  .mapToInt(Integer::parseInt)
                  .toArray());
    }
    serve(cases, calls);
  }

  static Status.Code call(ManagedChannel ch) {
    try {
      ClientCalls.blockingUnaryCall(
          ch, GrpcTesting.SAY, CallOptions.DEFAULT.withDeadlineAfter(10, TimeUnit.SECONDS), "hi");
      return Status.Code.OK;
    } catch (StatusRuntimeException e) {
      return e.getStatus().getCode();
    }
  }

  static void client(int index, int port) throws InterruptedException {
    ManagedChannel ch = GrpcTesting.channel(port);
    Span root = GlobalOpenTelemetry.getTracer("vectors").spanBuilder("case " + index).startSpan();
    Status.Code code;
    try (Scope ignored = root.makeCurrent()) {
      code = call(ch);
    } finally {
      root.end();
      ch.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
    }
    System.out.println(
        "RESULT "
            + (GrpcAgentIT.GRPC_RESULTS + index)
            + " "
            + new JSON()
                .toJSON(Map.of("code", code.name(), "trace", root.getSpanContext().getTraceId())));
  }

  static void serve(Object[] cases, Map<Integer, int[]> calls) throws Exception {
    Map<Integer, ManagedChannel> channels = new ConcurrentHashMap<>();
    Server front =
        GrpcTesting.serve(
            (req, headers, out) -> {
              int index = Integer.parseInt(req);
              Map<?, ?> c = (Map<?, ?>) cases[index];
              for (int port : calls.getOrDefault(index, new int[0])) {
                call(channels.computeIfAbsent(port, GrpcTesting::channel));
              }
              Status.Code code = Status.Code.valueOf((String) c.get("code"));
              if (code == Status.Code.OK) {
                out.onNext("ok");
                out.onCompleted();
                return;
              }
              Metadata trailers = new Metadata();
              if (c.get("set_claim") != null) {
                trailers.put(GrpcTesting.CLAIM, (String) c.get("set_claim"));
              }
              out.onError(Status.fromCode(code).asRuntimeException(trailers));
            });
    System.out.println("PORT " + front.getPort());
    System.out.flush();
    while (System.in.read() >= 0) {
      // until the runner closes the pipe
    }
    for (ManagedChannel ch : channels.values()) {
      ch.shutdownNow();
    }
    front.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
  }
}
