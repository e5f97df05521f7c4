// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks.hints;

import io.github.errorownership.hooks.BudgetLimits;
import io.github.errorownership.hooks.HintSource;
import io.github.errorownership.hooks.Mode;
import io.github.errorownership.hooks.OwnershipNames;
import java.io.IOException;
import java.net.SocketTimeoutException;
import java.net.URI;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.function.LongSupplier;
import javax.net.ssl.SSLSocketFactory;

/**
 * Polls a collector for one service's ownership hints and answers the hooks from the last good
 * ones. It revalidates with {@code If-None-Match}, polls again after the response's {@code
 * Cache-Control: max-age}, else the document's {@code ttl_seconds}, else 30 s, held within [1 s, 10
 * min]; after a failure (unreachable, a status other than 200 — or 304 to its own {@code
 * If-None-Match} —, a body over 1 MiB, a fetch over the 5 s fetch timeout, an invalid document) it
 * keeps the last good hints and backs off 1 s, 2 s, 4 s … up to 60 s. The last good hints are used
 * for at most 5 minutes after the collector last confirmed them; then, and before the first good
 * answer, every edge is unknown and the budget is the default. An ETag over 1 KiB is not kept.
 *
 * <p>{@link #mode} and {@link #budgetLimits} never wait on a fetch: they read the last good state
 * with one volatile read. {@link #start()} polls on a daemon thread; {@link #close()} stops it.
 *
 * <p>The polls are never spans: the client speaks HTTP/1.1 over a plain socket (TLS for https),
 * which no OpenTelemetry instrumentation covers, so the Java agent at its default settings
 * (java-http-client and http-url-connection instrumentation on) does not trace them.
 */
public final class HintsClient implements HintSource, AutoCloseable {
  /** The polling interval when neither Cache-Control nor ttl_seconds gives one. */
  public static final Duration DEFAULT_TTL = Duration.ofSeconds(30);

  /** How long the last good hints outlive the collector's silence. */
  public static final Duration DEFAULT_MAX_STALE = Duration.ofMinutes(5);

  /** The bound on each fetch, the body included. */
  public static final Duration DEFAULT_FETCH_TIMEOUT = Duration.ofSeconds(5);

  static final int MAX_BODY = 1 << 20;
  static final int MAX_ETAG = 1 << 10;
  private static final long MIN_POLL = 1;
  private static final long MAX_POLL = 600;
  private static final long MAX_BACKOFF = 60;

  private final URI uri;
  private final String service;
  private final PlainGet http;
  private final Map<String, List<String>> headers;
  private final LongSupplier nanoClock;
  private final long maxStaleNanos;
  private final Duration fetchTimeout;

  private volatile State state;
  private volatile boolean closed;
  private Thread poller;

  // Guarded by this (refresh is serialised).
  private String etag = "";
  private int failures;

  /** The result of one {@link #refresh()}: when to fetch next, and the error, if any. */
  public record Refresh(Duration next, Exception error) {
    /** Reports whether the fetch gave good hints. */
    public boolean ok() {
      return error == null;
    }
  }

  private static final class State {
    final Hints hints;
    final Index index;
    final long checked;

    State(Hints hints, Index index, long checked) {
      this.hints = hints;
      this.index = index;
      this.checked = checked;
    }
  }

  private HintsClient(Builder b) {
    String base =
        b.baseUrl.endsWith("/") ? b.baseUrl.substring(0, b.baseUrl.length() - 1) : b.baseUrl;
    this.uri =
        URI.create(
            base
                + OwnershipNames.HINTS_PATH
                + "?service="
                + URLEncoder.encode(b.service, StandardCharsets.UTF_8));
    this.service = b.service;
    this.http =
        new PlainGet(b.tls != null ? b.tls : (SSLSocketFactory) SSLSocketFactory.getDefault());
    this.headers = b.headers;
    this.nanoClock = b.nanoClock;
    this.maxStaleNanos = b.maxStale.toNanos();
    this.fetchTimeout = b.fetchTimeout;
  }

  /**
   * Returns a builder for {@code service}'s hints at {@code baseUrl} (e.g. http://collector:4320).
   */
  public static Builder builder(String baseUrl, String service) {
    return new Builder(baseUrl, service);
  }

  /** Starts polling on a daemon thread, and returns this client. */
  public synchronized HintsClient start() {
    if (poller == null && !closed) {
      poller = new Thread(this::run, "errorownership-hints");
      poller.setDaemon(true);
      poller.start();
    }
    return this;
  }

  private void run() {
    while (!closed) {
      Refresh r = refresh();
      try {
        Thread.sleep(r.next().toMillis());
      } catch (InterruptedException e) {
        return;
      }
    }
  }

  /** Stops polling. The last good hints stay in use until they are stale. */
  @Override
  public void close() {
    Thread t;
    synchronized (this) {
      closed = true;
      t = poller;
    }
    http.close();
    if (t != null) {
      t.interrupt();
    }
  }

  /** Fetches the hints once and returns when to fetch them next. On an error the last good stay. */
  public synchronized Refresh refresh() {
    try {
      Duration next = fetch();
      failures = 0;
      return new Refresh(next, null);
    } catch (Exception e) {
      if (e instanceof InterruptedException) {
        Thread.currentThread().interrupt();
      }
      failures++;
      long s = Math.min(1L << Math.min(failures - 1, 6), MAX_BACKOFF);
      return new Refresh(Duration.ofSeconds(s), e);
    }
  }

  private Duration fetch() throws Exception {
    Map<String, List<String>> h = new LinkedHashMap<>();
    h.put("Accept", List.of("application/json"));
    h.putAll(headers);
    State old = state;
    boolean revalidate = old != null && !etag.isEmpty();
    if (revalidate) {
      h.put("If-None-Match", List.of(etag));
    }
    PlainGet.Response res;
    try {
      res = http.get(uri, h, fetchTimeout.toNanos(), MAX_BODY);
    } catch (SocketTimeoutException e) {
      throw new Exception("hints: fetch timed out", e);
    } catch (IOException e) {
      throw new Exception("hints: fetch failed: " + e, e);
    }
    int status = res.status();
    if (status == 304 && revalidate) {
      state = new State(old.hints, old.index, nanoClock.getAsLong());
      return pollAfter(res.firstValue("Cache-Control"), old.hints);
    }
    if (status != 200) {
      throw new Exception("hints: status " + status);
    }
    byte[] body = res.body();
    if (body == null) {
      throw new Exception("hints: body over " + MAX_BODY + " bytes");
    }
    Hints parsed = Hints.parse(new String(body, StandardCharsets.UTF_8), service);
    state = new State(parsed, new Index(parsed.edges()), nanoClock.getAsLong());
    etag = res.firstValue("ETag").orElse("");
    // Sent back as a header: only what a header may hold, and not too much of it.
    if (etag.length() > MAX_ETAG || !headerValue(etag)) {
      etag = "";
    }
    return pollAfter(res.firstValue("Cache-Control"), parsed);
  }

  /** Visible ASCII, space and tab only: nothing that could end the header line or the request. */
  static boolean headerValue(String v) {
    for (int i = 0; i < v.length(); i++) {
      char c = v.charAt(i);
      if ((c < 0x20 && c != '\t') || c >= 0x7f) {
        return false;
      }
    }
    return true;
  }

  private static Duration pollAfter(Optional<String> cacheControl, Hints h) {
    long d = DEFAULT_TTL.toSeconds();
    long age = cacheControl.map(HintsClient::maxAge).orElse(-1L);
    if (age >= 0) {
      d = age;
    } else if (h != null && h.ttlSeconds() > 0) {
      d = h.ttlSeconds();
    }
    return Duration.ofSeconds(Math.min(Math.max(d, MIN_POLL), MAX_POLL));
  }

  /** Reads max-age from a Cache-Control value; -1 if there is no valid one. */
  static long maxAge(String cc) {
    for (String part : cc.split(",", -1)) {
      String p = part.trim();
      int eq = p.indexOf('=');
      if (eq < 0 || !p.substring(0, eq).equalsIgnoreCase("max-age")) {
        continue;
      }
      String v = p.substring(eq + 1);
      if (v.length() >= 2 && v.startsWith("\"") && v.endsWith("\"")) {
        v = v.substring(1, v.length() - 1);
      } else {
        v = v.replace("\"", "");
      }
      if (v.isEmpty()) {
        return -1;
      }
      for (int i = 0; i < v.length(); i++) {
        if (v.charAt(i) < '0' || v.charAt(i) > '9') {
          return -1;
        }
      }
      return v.length() > 12 ? MAX_POLL + 1 : Long.parseLong(v);
    }
    return -1;
  }

  private State current() {
    State st = state;
    if (st == null || nanoClock.getAsLong() - st.checked > maxStaleNanos) {
      return null;
    }
    return st;
  }

  /**
   * Returns the mode of the edge ({@code operation} → {@code peer}, {@code peerOperation}): {@code
   * peer} is the callee's service.name or the address the call went to (an address without a port
   * matches any port of its host, and the other way round); operations match the hints' route
   * templates; {@code peerOperation ""} answers for every edge to the peer (fail-open only if all
   * are). When the hints know no edge from {@code operation} to the peer, every inbound operation's
   * edges answer. Without hints, or when nothing matches: {@link Mode#UNKNOWN}.
   */
  @Override
  public Mode mode(String operation, String peer, String peerOperation) {
    State st = current();
    if (st == null) {
      return Mode.UNKNOWN;
    }
    return st.index.mode(
        operation == null ? "" : operation,
        peer == null ? "" : peer,
        peerOperation == null ? "" : peerOperation);
  }

  /** Returns the hints' retry budget, or the defaults. */
  @Override
  public BudgetLimits budgetLimits() {
    State st = current();
    return st == null ? BudgetLimits.defaults() : st.hints.budget();
  }

  /** Returns the hints in use, or empty when the safe defaults apply. */
  public Optional<Hints> hints() {
    State st = current();
    return st == null ? Optional.empty() : Optional.of(st.hints);
  }

  /** Finds the edges a hook's question is about. */
  static final class Index {
    private final List<HintEdge> edges;
    private final Map<String, List<Integer>> byPeer = new HashMap<>();
    private final Map<String, List<Integer>> portless = new HashMap<>();
    private final Map<String, List<Integer>> ported = new HashMap<>();

    Index(List<HintEdge> edges) {
      this.edges = edges;
      for (int i = 0; i < edges.size(); i++) {
        HintEdge e = edges.get(i);
        add(byPeer, e.peerService(), i);
        for (String a : e.peerAddresses()) {
          if (a.equals(e.peerService())) {
            continue;
          }
          add(byPeer, a, i);
          String host = hostOf(a);
          if (host != null) {
            add(ported, host, i);
          } else {
            add(portless, a, i);
          }
        }
      }
    }

    private static void add(Map<String, List<Integer>> m, String k, int n) {
      List<Integer> l = m.computeIfAbsent(k, x -> new ArrayList<>(2));
      if (l.isEmpty() || l.get(l.size() - 1) != n) {
        l.add(n);
      }
    }

    /** The host of "host:port" or "[v6]:port", or null when it has no port. */
    static String hostOf(String addr) {
      if (addr.startsWith("[")) {
        int close = addr.indexOf(']');
        if (close > 0 && addr.length() > close + 2 && addr.charAt(close + 1) == ':') {
          return addr.substring(1, close);
        }
        return null;
      }
      int colon = addr.indexOf(':');
      if (colon <= 0 || colon != addr.lastIndexOf(':') || colon == addr.length() - 1) {
        return null;
      }
      return addr.substring(0, colon);
    }

    Mode mode(String operation, String peer, String peerOperation) {
      List<Integer> cands = byPeer.get(peer);
      if (cands == null || cands.isEmpty()) {
        String host = hostOf(peer);
        cands = host != null ? portless.get(host) : ported.get(peer);
      }
      if (cands == null) {
        return Mode.UNKNOWN;
      }
      boolean mine = false;
      if (!operation.isEmpty()) {
        for (int i : cands) {
          if (Routes.matches(edges.get(i).operation(), operation)) {
            mine = true;
            break;
          }
        }
      }
      int open = 0;
      int close = 0;
      int unknown = 0;
      for (int i : cands) {
        HintEdge e = edges.get(i);
        if ((mine && !Routes.matches(e.operation(), operation))
            || (!peerOperation.isEmpty() && !Routes.matches(e.peerOperation(), peerOperation))) {
          continue;
        }
        switch (e.mode()) {
          case FAIL_OPEN -> open++;
          case FAIL_CLOSE -> close++;
          default -> unknown++;
        }
      }
      if (close > 0) {
        return Mode.FAIL_CLOSE;
      }
      if (open > 0 && unknown == 0) {
        return Mode.FAIL_OPEN;
      }
      return Mode.UNKNOWN;
    }
  }

  /** Builds a {@link HintsClient}. */
  public static final class Builder {
    private final String baseUrl;
    private final String service;
    private SSLSocketFactory tls;
    private final Map<String, List<String>> headers = new LinkedHashMap<>();
    private LongSupplier nanoClock = System::nanoTime;
    private Duration maxStale = DEFAULT_MAX_STALE;
    private Duration fetchTimeout = DEFAULT_FETCH_TIMEOUT;

    private Builder(String baseUrl, String service) {
      this.baseUrl = baseUrl;
      this.service = service;
    }

    /**
     * Makes https connections with {@code tls} (e.g. {@code sslContext.getSocketFactory()} for a
     * private CA or a client certificate); default: the JDK's default {@code SSLSocketFactory}.
     */
    public Builder setSslSocketFactory(SSLSocketFactory tls) {
      this.tls = tls;
      return this;
    }

    /**
     * Sends {@code name: value} with every fetch, e.g. {@code Authorization: Bearer …}.
     *
     * @throws IllegalArgumentException if name is not an HTTP token or value holds a control
     *     character
     */
    public Builder addHeader(String name, String value) {
      if (name.isEmpty() || !name.chars().allMatch(Builder::tokenChar)) {
        throw new IllegalArgumentException("hints: not a header name: " + name);
      }
      if (!headerValue(value)) {
        throw new IllegalArgumentException("hints: control character in the value of " + name);
      }
      headers.computeIfAbsent(name.toLowerCase(Locale.ROOT), k -> new ArrayList<>()).add(value);
      return this;
    }

    /** Bounds each fetch, the body included (default 5 s). */
    public Builder setFetchTimeout(Duration fetchTimeout) {
      this.fetchTimeout = fetchTimeout;
      return this;
    }

    /** Sets how long the last good hints outlive the collector's silence (default 5 min). */
    public Builder setMaxStale(Duration maxStale) {
      this.maxStale = maxStale;
      return this;
    }

    /** Reads time, in nanoseconds, from {@code nanoClock}: for tests. */
    public Builder setNanoClock(LongSupplier nanoClock) {
      this.nanoClock = nanoClock;
      return this;
    }

    private static boolean tokenChar(int c) {
      return c > 0x20 && c < 0x7f && "\"(),/:;<=>?@[\\]{}".indexOf(c) < 0;
    }

    /** Returns the client; it does not fetch until {@link #refresh()} or {@link #start()}. */
    public HintsClient build() {
      return new HintsClient(this);
    }
  }
}
