// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.javaagent.it;

import static io.github.errorownership.javaagent.it.AgentExtensionIT.CONFORMANCE;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.errorownership.hooks.testing.GrpcTesting;
import io.github.errorownership.hooks.testing.HintsServer;
import io.github.errorownership.javaagent.it.AgentExtensionIT.Run;
import io.github.errorownership.javaagent.it.AgentExtensionIT.SpanData;
import io.grpc.CallOptions;
import io.grpc.ClientInterceptors;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.Server;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.MetadataUtils;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.eclipse.jetty.util.ajax.JSON;
import org.junit.jupiter.api.Test;

/**
 * grpc.json through the zero-code path: GrpcApp under the real agent with the extension, its
 * channels and servers built as usual (Netty), the scripted callees and the front's caller here in
 * the runner, without the agent. The client cases run in AgentExtensionIT's client vectors' JVMs.
 */
class GrpcAgentIT {
  private static final String SCOPE = "io.opentelemetry.grpc-1.6";

  /** GrpcApp's client results are numbered from here, apart from client.json's. */
  static final int GRPC_RESULTS = 1000;

  static Map<?, ?> vectors() throws Exception {
    return (Map<?, ?>) new JSON().fromJSON(Files.readString(CONFORMANCE.resolve("grpc.json")));
  }

  static Object[] cases(String part) throws Exception {
    return (Object[]) ((Map<?, ?>) vectors().get(part)).get("cases");
  }

  static List<Object> list(Object o) {
    return o == null ? List.of() : Arrays.asList((Object[]) o);
  }

  /**
   * grpc.json's client cases, run by AgentExtensionIT's client vectors in their child JVMs (same
   * configurations): each case's scripted callee here, its calls there.
   */
  static final class Clients implements AgentExtensionIT.AlsoRun, AutoCloseable {
    private final Object[] cases;
    private final Map<Map<String, String>, List<Integer>> byEnv;
    private final Map<Integer, GrpcTesting.Scripted> callees = new HashMap<>();
    private final List<Server> servers = new ArrayList<>();
    private int checked;

    Clients() throws Exception {
      cases = cases("client");
      byEnv = AgentExtensionIT.byEnv(cases);
    }

    @Override
    public List<String> args(Map<String, String> env) throws Exception {
      List<String> args =
          new ArrayList<>(List.of("grpc-client", CONFORMANCE.resolve("grpc.json").toString()));
      for (int i : byEnv.getOrDefault(env, List.of())) {
        GrpcTesting.Scripted callee =
            new GrpcTesting.Scripted(list(((Map<?, ?>) cases[i]).get("responses")));
        Server s = GrpcTesting.serve(callee);
        servers.add(s);
        callees.put(i, callee);
        args.add(i + ":" + s.getPort());
      }
      return args;
    }

    @Override
    public void check(Map<String, String> env, Run run) {
      for (int i : byEnv.getOrDefault(env, List.of())) {
        Map<?, ?> c = (Map<?, ?>) cases[i];
        String name = "grpc.json " + c.get("name");
        Map<?, ?> w = (Map<?, ?>) c.get("want");
        Map<?, ?> got = run.results().get(GRPC_RESULTS + i);
        assertNotNull(got, name + ": no result");
        assertEquals(w.get("code"), got.get("code"), name + ": code");
        assertEquals(
            list(w.get("requests")),
            callees.get(i).previous(),
            name + ": grpc-previous-rpc-attempts per attempt");
        AgentExtensionIT.checkAttempts(
            run, name, got.get("trace"), (Object[]) w.get("spans"), SCOPE);
        checked++;
      }
    }

    /** Every case ran. */
    void checkedAll() {
      assertEquals(cases.length, checked, "grpc.json client cases checked");
    }

    @Override
    public void close() {
      for (Server s : servers) {
        s.shutdownNow();
      }
    }
  }

  /** What the front answered a case. */
  record Answer(String code, String claim, String pushback) {}

  /** Calls the front for case {@code i}, in a trace of its own: {@code trace}. */
  static Answer front(ManagedChannel ch, int i, String trace) {
    Metadata md = new Metadata();
    md.put(
        Metadata.Key.of("traceparent", Metadata.ASCII_STRING_MARSHALLER),
        "00-" + trace + "-00f067aa0ba902b7-01");
    try {
      ClientCalls.blockingUnaryCall(
          ClientInterceptors.intercept(ch, MetadataUtils.newAttachHeadersInterceptor(md)),
          GrpcTesting.SAY,
          CallOptions.DEFAULT.withDeadlineAfter(10, TimeUnit.SECONDS),
          Integer.toString(i));
      return new Answer("OK", null, null);
    } catch (StatusRuntimeException e) {
      Metadata t = e.getTrailers() == null ? new Metadata() : e.getTrailers();
      return new Answer(
          e.getStatus().getCode().name(), t.get(GrpcTesting.CLAIM), t.get(GrpcTesting.PUSHBACK));
    }
  }

  static String trace(int i) {
    return String.format("%032x", 0x4f2c0000L + i);
  }

  @Test
  void serverVectors() throws Exception {
    Object[] cases = cases("server");
    List<Server> callees = new ArrayList<>();
    List<String> args =
        new ArrayList<>(List.of("grpc-serve", CONFORMANCE.resolve("grpc.json").toString()));
    List<Object> edges = new ArrayList<>();
    int await = -1;
    try (HintsServer hints = HintsServer.start()) {
      for (int i = 0; i < cases.length; i++) {
        List<String> ports = new ArrayList<>();
        List<Object> calls = list(((Map<?, ?>) cases[i]).get("calls"));
        for (int j = 0; j < calls.size(); j++) {
          Map<?, ?> call = (Map<?, ?>) calls.get(j);
          Server s = GrpcTesting.serve(new GrpcTesting.Scripted(list(call.get("responses"))));
          callees.add(s);
          ports.add(Integer.toString(s.getPort()));
          if (call.get("mode") != null) {
            // The edge of the front's method to this callee, by its address.
            edges.add(
                Map.of(
                    "operation", GrpcTesting.SAY.getFullMethodName(),
                    "peer_service", "callee-" + i + "-" + j,
                    "peer_addresses", List.of("127.0.0.1:" + s.getPort()),
                    "peer_operation", GrpcTesting.SAY.getFullMethodName(),
                    "mode", call.get("mode")));
            await = await < 0 ? i : await;
          }
        }
        args.add(i + "=" + String.join(",", ports));
      }
      hints.serve(
          200,
          new JSON()
              .toJSON(
                  Map.of("version", 1, "service", "checkout", "ttl_seconds", 30, "edges", edges)),
          Map.of());
      Map<Integer, Answer> answers = new HashMap<>();
      int first = await;
      Run run =
          AgentExtensionIT.run(
              true,
              Map.of("ERROROWNERSHIP_HINTS_ENDPOINT", hints.url(), "OTEL_SERVICE_NAME", "checkout"),
              List.of(),
              port -> {
                ManagedChannel ch = GrpcTesting.channel(port);
                try {
                  if (first >= 0) {
                    // The agent's hint client polls once it starts: wait for its hints.
                    Object want = ((Map<?, ?>) ((Map<?, ?>) cases[first]).get("want")).get("claim");
                    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
                    while (!String.valueOf(want)
                        .equals(String.valueOf(front(ch, first, trace(99)).claim()))) {
                      assertTrue(System.nanoTime() < deadline, "the hints did not arrive in 30 s");
                      Thread.sleep(50);
                    }
                  }
                  for (int i = 0; i < cases.length; i++) {
                    answers.put(i, front(ch, i, trace(i)));
                  }
                } finally {
                  ch.shutdownNow();
                }
              },
              args.toArray(String[]::new));
      assertTrue(first < 0 || hints.requests() > 0, "the agent's hint client never polled");
      for (int i = 0; i < cases.length; i++) {
        Map<?, ?> c = (Map<?, ?>) cases[i];
        String name = (String) c.get("name");
        Map<?, ?> w = (Map<?, ?>) c.get("want");
        Answer a = answers.get(i);
        assertEquals(c.get("code"), a.code(), name + ": code");
        assertEquals(w.get("claim"), a.claim(), name + ": error-claim");
        assertEquals(w.get("pushback"), a.pushback(), name + ": grpc-retry-pushback-ms");
        String trace = trace(i);
        List<SpanData> servers =
            run.spans().stream().filter(s -> s.kind() == 2 && s.trace().equals(trace)).toList();
        assertEquals(1, servers.size(), name + ": the agent's SERVER span");
        assertEquals(SCOPE, servers.get(0).scope(), name + ": the agent's span");
        assertEquals(
            AgentExtensionIT.want((Map<?, ?>) w.get("span")),
            AgentExtensionIT.ours(servers.get(0)),
            name + ": server span");
        assertEquals(0, servers.get(0).dropped(), name + ": dropped attributes");
      }
    } finally {
      for (Server s : callees) {
        s.shutdownNow();
      }
    }
  }
}
