// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.javaagent.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.errorownership.hooks.testing.HintsServer;
import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import org.eclipse.jetty.util.ajax.JSON;
import org.junit.jupiter.api.Test;

/**
 * The zero-code path: VectorApp, with nothing of the hooks on its class path, run in child JVMs
 * under the real agent 2.22.0 with the built extension jar (-Dotel.javaagent.extensions), spans
 * read from the agent's logging-otlp exporter. client.json (java.net.http, and OkHttp 4) and
 * server.json (a Jetty 12 servlet; server.json's modes served as hints from 127.0.0.1),
 * HttpURLConnection calls claimed by the rules, the hooks switched off as any instrumentation, the
 * overhead against the agent alone.
 */
class AgentExtensionIT {
  static {
    // Before the JDK server's first use here: its small answers must not wait out delayed ACKs.
    System.setProperty("sun.net.httpserver.nodelay", "true");
  }

  private static final String AGENT = System.getProperty("otel.agent.jar");
  private static final String EXTENSION = System.getProperty("extension.jar");
  static final Path CONFORMANCE =
      Path.of(
          System.getenv("CONFORMANCE_DIR") != null
              ? System.getenv("CONFORMANCE_DIR")
              : System.getProperty("conformance.dir"));
  private static final String EXPORTER = "OtlpJsonLoggingSpanExporter - ";
  private static final List<String> OURS =
      List.of(
          "error_ownership.retry.attempt",
          "http.request.resend_count",
          "error_ownership.claim.received",
          "error_ownership.retry.decision",
          "error_ownership.claim.sent",
          "error_ownership.claim.reason");

  record SpanData(
      String trace, int kind, String scope, long start, Map<String, Object> attrs, long dropped) {}

  record Run(Map<Integer, Map<?, ?>> results, List<SpanData> spans) {}

  static Object[] cases(String file) throws IOException {
    return (Object[])
        ((Map<?, ?>) new JSON().fromJSON(Files.readString(CONFORMANCE.resolve(file)))).get("cases");
  }

  static Run run(boolean extension, Map<String, String> env, String... args) throws Exception {
    return run(extension, env, List.of(), args);
  }

  /** What the runner does while a child JVM serves on {@code port}. */
  interface WhileServing {
    void run(int port) throws Exception;
  }

  static Run run(boolean extension, Map<String, String> env, List<String> jvmArgs, String... args)
      throws Exception {
    return run(extension, env, jvmArgs, null, args);
  }

  /**
   * Runs VectorApp under the agent: its RESULT lines and the spans it exported. With {@code
   * serving}, the child prints {@code PORT <port>}, {@code serving} runs, and its standard input is
   * closed to end it.
   */
  static Run run(
      boolean extension,
      Map<String, String> env,
      List<String> jvmArgs,
      WhileServing serving,
      String... args)
      throws Exception {
    // javax-server: JavaxApp on Jetty 9.4, a class path without Jetty 12.
    boolean javax = args[0].equals("javax-server");
    List<String> cmd = new ArrayList<>();
    cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    cmd.add("-javaagent:" + AGENT);
    if (extension) {
      cmd.add("-Dotel.javaagent.extensions=" + EXTENSION);
    }
    cmd.addAll(jvmArgs);
    cmd.addAll(
        List.of(
            "-Dotel.traces.exporter=logging-otlp",
            "-Dotel.metrics.exporter=none",
            "-Dotel.logs.exporter=none",
            "-Dotel.bsp.schedule.delay=100",
            "-cp",
            javax ? System.getProperty("javax.classpath") : System.getProperty("app.classpath"),
            javax ? JavaxApp.class.getName() : VectorApp.class.getName()));
    cmd.addAll(Arrays.asList(args));
    ProcessBuilder pb = new ProcessBuilder(cmd);
    pb.environment().putAll(env);
    File out = File.createTempFile("agent-it", ".out");
    File err = File.createTempFile("agent-it", ".err");
    pb.redirectOutput(out).redirectError(err);
    Process p = pb.start();
    if (serving != null) {
      long deadline = System.nanoTime() + TimeUnit.MINUTES.toNanos(1);
      String port = null;
      while (port == null) {
        port =
            Files.readString(out.toPath(), StandardCharsets.UTF_8)
                .lines()
                .filter(l -> l.startsWith("PORT "))
                .map(l -> l.substring(5))
                .findFirst()
                .orElse(null);
        assertTrue(p.isAlive() || port != null, "the child JVM ended before it served");
        assertTrue(System.nanoTime() < deadline, "the child JVM did not serve in a minute");
        Thread.sleep(20);
      }
      try {
        serving.run(Integer.parseInt(port.trim()));
      } finally {
        p.getOutputStream().close();
      }
    }
    assertTrue(p.waitFor(3, TimeUnit.MINUTES), "child JVM did not finish");
    String stdout = Files.readString(out.toPath(), StandardCharsets.UTF_8);
    String stderr = Files.readString(err.toPath(), StandardCharsets.UTF_8);
    assertEquals(0, p.exitValue(), "child JVM failed:\n" + stdout + stderr);
    Map<Integer, Map<?, ?>> results = new TreeMap<>();
    for (String line : stdout.lines().toList()) {
      if (line.startsWith("RESULT ")) {
        String[] f = line.split(" ", 3);
        results.put(Integer.parseInt(f[1]), (Map<?, ?>) new JSON().fromJSON(f[2]));
      }
    }
    List<SpanData> spans = new ArrayList<>();
    for (String line : stderr.lines().toList()) {
      int i = line.indexOf(EXPORTER);
      if (i < 0) {
        continue;
      }
      Map<?, ?> doc = (Map<?, ?>) new JSON().fromJSON(line.substring(i + EXPORTER.length()));
      for (Object ss : (Object[]) doc.get("scopeSpans")) {
        String scope = (String) ((Map<?, ?>) ((Map<?, ?>) ss).get("scope")).get("name");
        for (Object o : (Object[]) ((Map<?, ?>) ss).get("spans")) {
          Map<?, ?> s = (Map<?, ?>) o;
          Map<String, Object> attrs = new HashMap<>();
          Object[] list = (Object[]) s.get("attributes");
          for (Object a : list == null ? new Object[0] : list) {
            Map<?, ?> kv = (Map<?, ?>) a;
            Object v = ((Map<?, ?>) kv.get("value")).values().iterator().next();
            attrs.put((String) kv.get("key"), v);
          }
          Object dropped = s.get("droppedAttributesCount");
          spans.add(
              new SpanData(
                  (String) s.get("traceId"),
                  ((Number) s.get("kind")).intValue(),
                  scope,
                  Long.parseLong(String.valueOf(s.get("startTimeUnixNano"))),
                  attrs,
                  dropped == null ? 0 : ((Number) dropped).longValue()));
        }
      }
    }
    return new Run(results, spans);
  }

  /** The attributes of ours a span carries, numbers as strings (OTLP JSON's int64). */
  static Map<String, String> ours(SpanData s) {
    Map<String, String> m = new TreeMap<>();
    for (String k : OURS) {
      if (s.attrs().containsKey(k)) {
        m.put(k, String.valueOf(s.attrs().get(k)));
      }
    }
    return m;
  }

  static Map<String, String> want(Map<?, ?> w) {
    Map<String, String> m = new TreeMap<>();
    w.forEach(
        (k, v) ->
            m.put((String) k, v instanceof Number n ? Long.toString(n.longValue()) : (String) v));
    return m;
  }

  /** More cases a client vectors' child JVM runs, in the same configuration. */
  interface AlsoRun {
    /** The arguments of the cases of configuration {@code env}, after {@link VectorApp#AND}. */
    List<String> args(Map<String, String> env) throws Exception;

    /** Checks the cases of configuration {@code env} in {@code run}. */
    void check(Map<String, String> env, Run run) throws Exception;
  }

  @Test
  void clientVectors() throws Exception {
    // client.json again through sendAsync, and grpc.json's client cases, which come in
    // client.json's
    // configurations: one child JVM for all three.
    Object[] cases = cases("client.json");
    int[] async = {0};
    AlsoRun sendAsync =
        new AlsoRun() {
          @Override
          public List<String> args(Map<String, String> env) {
            List<String> args =
                new ArrayList<>(List.of("async", CONFORMANCE.resolve("client.json").toString()));
            byEnv(cases).get(env).forEach(i -> args.add(Integer.toString(i)));
            return args;
          }

          @Override
          public void check(Map<String, String> env, Run run) {
            for (int i : byEnv(cases).get(env)) {
              checkClient(
                  run,
                  "sendAsync: ",
                  (Map<?, ?>) cases[i],
                  VectorApp.ASYNC_RESULTS + i,
                  "io.opentelemetry.java-http-client");
              async[0]++;
            }
          }
        };
    try (GrpcAgentIT.Clients grpc = new GrpcAgentIT.Clients()) {
      clientVectors("client", "io.opentelemetry.java-http-client", sendAsync, grpc);
      grpc.checkedAll();
    }
    assertEquals(cases.length, async[0], "client.json through sendAsync");
  }

  @Test
  void clientVectorsThroughOkHttp() throws Exception {
    clientVectors("okhttp", "io.opentelemetry.okhttp-3.0");
  }

  /**
   * The cases by the environment that sets them up (max_attempts, budget), in the order of their
   * first case: one child JVM each, the environment being the hooks' only setting.
   */
  static Map<Map<String, String>, List<Integer>> byEnv(Object[] cases) {
    Map<Map<String, String>, List<Integer>> byEnv = new java.util.LinkedHashMap<>();
    for (int i = 0; i < cases.length; i++) {
      Map<?, ?> c = (Map<?, ?>) cases[i];
      Map<String, String> env = new TreeMap<>();
      if (c.get("max_attempts") != null) {
        env.put("ERROROWNERSHIP_MAX_ATTEMPTS", String.valueOf(c.get("max_attempts")));
      }
      Map<?, ?> budget = (Map<?, ?>) c.get("budget");
      if (budget != null) {
        env.put("ERROROWNERSHIP_RETRY_RATIO", String.valueOf(budget.get("ratio")));
        env.put(
            "ERROROWNERSHIP_MIN_RETRIES_PER_SECOND",
            String.valueOf(budget.get("min_retries_per_second")));
      }
      byEnv.computeIfAbsent(env, k -> new ArrayList<>()).add(i);
    }
    return byEnv;
  }

  /**
   * Checks one case's attempts: exactly the agent's CLIENT spans of {@code trace}, of {@code
   * scope}.
   */
  static void checkAttempts(Run run, String name, Object trace, Object[] wantSpans, String scope) {
    List<SpanData> attempts =
        run.spans().stream()
            .filter(s -> s.trace().equals(trace) && s.kind() == 3)
            .sorted(Comparator.comparingLong(SpanData::start))
            .toList();
    assertEquals(wantSpans.length, attempts.size(), name + ": one agent CLIENT span per attempt");
    for (int a = 0; a < wantSpans.length; a++) {
      SpanData s = attempts.get(a);
      assertEquals(scope, s.scope(), name + ": the agent's span");
      assertEquals(want((Map<?, ?>) wantSpans[a]), ours(s), name + ": attempt " + a);
      assertEquals(0, s.dropped(), name + ": attempt " + a + " dropped attributes");
    }
  }

  /**
   * client.json through the client {@code mode} names, each attempt a span of {@code scope}; and
   * {@code also}'s cases in the same child JVMs.
   */
  static void clientVectors(String mode, String scope, AlsoRun... also) throws Exception {
    Object[] cases = cases("client.json");
    int checked = 0;
    for (Map.Entry<Map<String, String>, List<Integer>> e : byEnv(cases).entrySet()) {
      List<String> args =
          new ArrayList<>(List.of(mode, CONFORMANCE.resolve("client.json").toString()));
      e.getValue().forEach(i -> args.add(Integer.toString(i)));
      for (AlsoRun a : also) {
        args.add(VectorApp.AND);
        args.addAll(a.args(e.getKey()));
      }
      Run run = run(true, e.getKey(), args.toArray(String[]::new));
      for (AlsoRun a : also) {
        a.check(e.getKey(), run);
      }
      for (int i : e.getValue()) {
        checkClient(run, "", (Map<?, ?>) cases[i], i, scope);
        checked++;
      }
    }
    assertEquals(cases.length, checked);
  }

  /** Checks client.json's case {@code c}, result {@code result} of {@code run}. */
  static void checkClient(Run run, String prefix, Map<?, ?> c, int result, String scope) {
    String name = prefix + c.get("name");
    Map<?, ?> w = (Map<?, ?>) c.get("want");
    Map<?, ?> got = run.results().get(result);
    assertNotNull(got, name + ": no result");
    assertEquals(
        ((Number) w.get("status")).intValue(),
        ((Number) got.get("status")).intValue(),
        name + ": status");
    assertEquals(
        Arrays.asList((Object[]) w.get("requests")),
        Arrays.asList((Object[]) got.get("requests")),
        name + ": Retry-Attempt per attempt");
    if (w.get("bodies") != null) {
      assertEquals(
          Arrays.asList((Object[]) w.get("bodies")),
          Arrays.asList((Object[]) got.get("bodies")),
          name + ": bodies");
    }
    checkAttempts(run, name, got.get("trace"), (Object[]) w.get("spans"), scope);
  }

  /** The server span of case i: the agent's SERVER span of GET /case/i. */
  static SpanData serverSpan(Run run, int i) {
    return run.spans().stream()
        .filter(s -> s.kind() == 2 && ("/case/" + i).equals(s.attrs().get("url.path")))
        .findFirst()
        .orElseThrow(() -> new AssertionError("no SERVER span for case " + i));
  }

  static void checkServer(Run run, Object[] cases, List<Integer> picks) {
    for (int i : picks) {
      Map<?, ?> c = (Map<?, ?>) cases[i];
      String name = (String) c.get("name");
      Map<?, ?> w = (Map<?, ?>) c.get("want");
      Map<?, ?> got = run.results().get(i);
      assertNotNull(got, name + ": no result");
      List<Object> header = Arrays.asList((Object[]) got.get("header"));
      assertEquals(
          w.get("header") == null ? List.of() : List.of(w.get("header")),
          header,
          name + ": Error-Claim");
      SpanData s = serverSpan(run, i);
      assertEquals(want((Map<?, ?>) w.get("span")), ours(s), name + ": server span");
      assertEquals(0, s.dropped(), name + ": dropped attributes");
    }
  }

  /**
   * The hints of server.json's modes: the edge from GET /case/i to its call j (127.0.0.1, any port,
   * peer operation GET /c{i}/{j}), as the collector would serve them for service checkout.
   */
  static String hints(Object[] cases) {
    List<Object> edges = new ArrayList<>();
    for (int i = 0; i < cases.length; i++) {
      Object[] calls = (Object[]) ((Map<?, ?>) cases[i]).get("calls");
      for (int j = 0; calls != null && j < calls.length; j++) {
        Object mode = ((Map<?, ?>) calls[j]).get("mode");
        if (mode != null) {
          edges.add(
              Map.of(
                  "operation", "GET /case/" + i,
                  "peer_service", "callee-" + i + "-" + j,
                  "peer_addresses", List.of("127.0.0.1"),
                  "peer_operation", "GET " + Calls.calleePath(i, j),
                  "mode", mode));
        }
      }
    }
    return new JSON()
        .toJSON(Map.of("version", 1, "service", "checkout", "ttl_seconds", 30, "edges", edges));
  }

  @Test
  void serverVectors() throws Exception {
    serverVectors("server");
  }

  @Test
  void serverVectorsOnJavaxServlet() throws Exception {
    serverVectors("javax-server");
  }

  /** All of server.json through {@code mode}: Jetty 12 (Jakarta) or Jetty 9.4 (javax). */
  static void serverVectors(String mode) throws Exception {
    Object[] cases = cases("server.json");
    List<String> args =
        new ArrayList<>(List.of(mode, CONFORMANCE.resolve("server.json").toString()));
    List<Integer> picks = new ArrayList<>();
    for (int i = 0; i < cases.length; i++) {
      picks.add(i);
      args.add(Integer.toString(i));
      // The first case with a mode waits for the agent's hint client's first poll.
      if (new JSON().toJSON(cases[i]).contains("\"mode\"") && !args.get(2).startsWith("--")) {
        args.add(2, VectorApp.AWAIT + i);
      }
    }
    try (HintsServer server = HintsServer.start()) {
      server.serve(200, hints(cases), Map.of());
      Map<String, String> env =
          Map.of("ERROROWNERSHIP_HINTS_ENDPOINT", server.url(), "OTEL_SERVICE_NAME", "checkout");
      checkServer(run(true, env, args.toArray(String[]::new)), cases, picks);
      assertTrue(server.requests() > 0, "the agent's hint client never polled");
    }
  }

  @Test
  void offLikeAnyInstrumentation() throws Exception {
    // The module's name is error-ownership: the agent reads otel.instrumentation.NAME.enabled.
    List<String> off = List.of("-Dotel.instrumentation.error-ownership.enabled=false");
    Object[] server = cases("server.json");
    Object[] client = cases("client.json");
    List<String> serverArgs =
        new ArrayList<>(List.of("server", CONFORMANCE.resolve("server.json").toString()));
    List<String> clientArgs =
        new ArrayList<>(List.of("client", CONFORMANCE.resolve("client.json").toString()));
    for (int i = 0; i < server.length; i++) {
      serverArgs.add(Integer.toString(i));
    }
    for (int i = 0; i < client.length; i++) {
      clientArgs.add(Integer.toString(i));
    }
    Run s = run(true, Map.of(), off, serverArgs.toArray(String[]::new));
    for (int i = 0; i < server.length; i++) {
      Map<?, ?> c = (Map<?, ?>) server[i];
      Object[] set = (Object[]) c.get("set_claim");
      // Only what the handler set itself (HttpURLConnection lists repeated headers last first).
      assertEquals(
          set == null ? List.of() : Arrays.stream(set).sorted().toList(),
          Arrays.stream((Object[]) s.results().get(i).get("header")).sorted().toList(),
          c.get("name") + ": Error-Claim with the hooks off");
      assertEquals(Map.of(), ours(serverSpan(s, i)), c.get("name") + ": server span");
    }
    Run r = run(true, Map.of(), off, clientArgs.toArray(String[]::new));
    clientArgs.set(0, "okhttp");
    Run ok = run(true, Map.of(), off, clientArgs.toArray(String[]::new));
    for (Run run : List.of(r, ok)) {
      for (int i = 0; i < client.length; i++) {
        assertEquals(
            1,
            ((Object[]) run.results().get(i).get("requests")).length,
            ((Map<?, ?>) client[i]).get("name") + ": one attempt with the hooks off");
      }
    }
    for (Run run : List.of(s, r, ok)) {
      for (SpanData span : run.spans()) {
        assertEquals(Map.of(), ours(span), "a span with the hooks' attributes: " + span);
      }
    }
  }

  @Test
  void httpUrlConnectionCallsCount() throws Exception {
    // The handler calls through HttpURLConnection, which the library hooks never wrapped: each
    // call (one attempt, not retried) is in the ledger, with the claim it carried.
    Object[] cases = cases("server.json");
    List<Integer> picks = List.of(0, 7, 8, 9);
    List<String> args =
        new ArrayList<>(List.of("huc", CONFORMANCE.resolve("server.json").toString()));
    picks.forEach(i -> args.add(Integer.toString(i)));
    checkServer(run(true, Map.of(), args.toArray(String[]::new)), cases, picks);
  }

  /** A warm child JVM serving VectorApp's /work: {@code serve}, its port read from its output. */
  record Child(Process process, URI work) implements AutoCloseable {
    static Child start(boolean extension, String calleeUrl) throws IOException {
      List<String> cmd = new ArrayList<>();
      cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
      cmd.add("-javaagent:" + AGENT);
      if (extension) {
        cmd.add("-Dotel.javaagent.extensions=" + EXTENSION);
      }
      cmd.addAll(
          List.of(
              "-Dotel.traces.exporter=none",
              "-Dotel.metrics.exporter=none",
              "-Dotel.logs.exporter=none",
              "-cp",
              System.getProperty("app.classpath"),
              VectorApp.class.getName(),
              "serve",
              calleeUrl));
      Process p = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.DISCARD).start();
      BufferedReader out =
          new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
      for (String line = out.readLine(); line != null; line = out.readLine()) {
        if (line.startsWith("PORT ")) {
          return new Child(p, URI.create("http://127.0.0.1:" + line.substring(5) + "/work"));
        }
      }
      throw new IOException("the child JVM ended before it served");
    }

    @Override
    public void close() throws IOException {
      process.getOutputStream().close();
      try {
        if (!process.waitFor(30, TimeUnit.SECONDS)) {
          process.destroyForcibly();
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        process.destroyForcibly();
      }
    }
  }

  /** {@code n} sequential requests to {@code uri}: the nanoseconds they took. */
  static long requests(HttpClient client, URI uri, int n) throws Exception {
    HttpRequest r = HttpRequest.newBuilder(uri).build();
    long t0 = System.nanoTime();
    for (int i = 0; i < n; i++) {
      assertEquals(200, client.send(r, HttpResponse.BodyHandlers.discarding()).statusCode());
    }
    return System.nanoTime() - t0;
  }

  static double quantile(double[] sorted, double q) {
    double pos = q * (sorted.length - 1);
    int lo = (int) Math.floor(pos);
    int hi = Math.min(lo + 1, sorted.length - 1);
    return sorted[lo] + (pos - lo) * (sorted[hi] - sorted[lo]);
  }

  @Test
  void overheadAgainstTheAgentAlone() throws Exception {
    // Both variants warm at once, one 127.0.0.1 callee for both, requests alternated in ABBA
    // rounds: the shared machine's noise falls on both alike, and the median ratio shrugs off the
    // rounds it spoils. A figure, never an assert on time.
    int rounds = 20;
    int perRound = 200;
    double[] ratios = new double[rounds];
    double[] bare = new double[rounds];
    double[] hooked = new double[rounds];
    HttpClient client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
    try (Calls.Callee callee = new Calls.Callee(new Object[] {Map.of("status", 200L)});
        Child a = Child.start(false, callee.url());
        Child b = Child.start(true, callee.url())) {
      for (int i = 0; i < 4; i++) {
        requests(client, a.work(), 250);
        requests(client, b.work(), 250);
      }
      for (int r = 0; r < rounds; r++) {
        long ta;
        long tb;
        if (r % 2 == 0) {
          ta = requests(client, a.work(), perRound);
          tb = requests(client, b.work(), perRound);
        } else {
          tb = requests(client, b.work(), perRound);
          ta = requests(client, a.work(), perRound);
        }
        bare[r] = ta / 1000.0 / perRound;
        hooked[r] = tb / 1000.0 / perRound;
        ratios[r] = (double) tb / ta;
      }
    }
    Arrays.sort(ratios);
    Arrays.sort(bare);
    Arrays.sort(hooked);
    String line =
        String.format(
            java.util.Locale.ROOT,
            "zero-code overhead (agent 2.22.0, %d ABBA rounds of %d requests, side by side): agent"
                + " alone %.1f µs/request, agent + extension %.1f µs/request, ratio median %.3f"
                + " (IQR %.3f-%.3f)",
            rounds,
            perRound,
            quantile(bare, 0.5),
            quantile(hooked, 0.5),
            quantile(ratios, 0.5),
            quantile(ratios, 0.25),
            quantile(ratios, 0.75));
    System.out.println(line);
    assertTrue(Double.isFinite(quantile(ratios, 0.5)) && quantile(ratios, 0.5) > 0, line);
  }
}
