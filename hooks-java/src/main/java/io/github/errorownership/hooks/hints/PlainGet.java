// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks.hints;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.function.LongSupplier;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.SSLSocket;
import javax.net.ssl.SSLSocketFactory;

/**
 * One HTTP/1.1 GET over a plain {@link Socket} (or an {@link SSLSocket} for https), with {@code
 * Connection: close}.
 *
 * <p>Why not {@code java.net.http.HttpClient} or {@code HttpURLConnection}: the OpenTelemetry Java
 * agent instruments both by default, so every poll of the hints would be a CLIENT span of its own
 * trace, and the analysis would count those traces as calls of the service. The agent offers the
 * application no supported way to run one call untraced ({@code InstrumentationUtil} is in the
 * API's internal package, and agents before 2.20 ignore it); no instrumentation covers a plain
 * socket. The hints server is the collector's extension: a GET, a JSON body, Content-Length or
 * chunked, nothing more is needed.
 */
final class PlainGet {
  /** The status line and headers together: more is not a hints server. */
  static final int MAX_HEAD = 64 << 10;

  /** What came back: the status, the headers by lower-case name, and the body (null past limit). */
  static final class Response {
    private final int status;
    private final Map<String, List<String>> headers;
    private final byte[] body;

    Response(int status, Map<String, List<String>> headers, byte[] body) {
      this.status = status;
      this.headers = headers;
      this.body = body;
    }

    int status() {
      return status;
    }

    /** The body, or null when it was over the limit. */
    byte[] body() {
      return body;
    }

    Optional<String> firstValue(String name) {
      List<String> vs = headers.get(name.toLowerCase(Locale.ROOT));
      return vs == null || vs.isEmpty() ? Optional.empty() : Optional.of(vs.get(0));
    }
  }

  private final SSLSocketFactory tls;
  private final LongSupplier nanoClock;
  private volatile Socket inFlight;
  private volatile boolean closed;

  PlainGet(SSLSocketFactory tls) {
    this.tls = tls;
    this.nanoClock = System::nanoTime;
  }

  /** Closes the socket of a GET in flight, so that it ends now, and every later GET fails. */
  void close() {
    closed = true;
    Socket s = inFlight;
    if (s != null) {
      try {
        s.close();
      } catch (IOException e) {
        // Closing is all that was asked; the GET in flight fails with its own error.
      }
    }
  }

  /**
   * GETs uri with headers (their names as given; values free of CR and LF, as the builder checks),
   * the whole exchange bounded by timeoutNanos, the body by maxBody bytes.
   */
  Response get(URI uri, Map<String, List<String>> headers, long timeoutNanos, int maxBody)
      throws IOException {
    long deadline = nanoClock.getAsLong() + timeoutNanos;
    boolean https = "https".equalsIgnoreCase(uri.getScheme());
    if (!https && !"http".equalsIgnoreCase(uri.getScheme())) {
      throw new IOException("hints: unsupported scheme " + uri.getScheme());
    }
    String host = uri.getHost();
    if (host == null) {
      throw new IOException("hints: no host in " + uri);
    }
    String bare = host.startsWith("[") ? host.substring(1, host.length() - 1) : host;
    int port = uri.getPort() >= 0 ? uri.getPort() : https ? 443 : 80;
    Socket socket = new Socket();
    inFlight = socket;
    try (Socket s = socket) {
      if (closed) {
        throw new IOException("hints: client closed");
      }
      s.connect(new InetSocketAddress(bare, port), millisLeft(deadline));
      Socket conn = s;
      if (https) {
        SSLSocket ssl = (SSLSocket) tls.createSocket(s, bare, port, true);
        SSLParameters p = ssl.getSSLParameters();
        // Without it the certificate's name is never compared with the host.
        p.setEndpointIdentificationAlgorithm("HTTPS");
        ssl.setSSLParameters(p);
        ssl.setSoTimeout(millisLeft(deadline));
        ssl.startHandshake();
        conn = ssl;
      }
      StringBuilder req = new StringBuilder(256);
      String path = uri.getRawPath() == null || uri.getRawPath().isEmpty() ? "/" : uri.getRawPath();
      req.append("GET ").append(path);
      if (uri.getRawQuery() != null) {
        req.append('?').append(uri.getRawQuery());
      }
      req.append(" HTTP/1.1\r\nHost: ").append(host);
      if (uri.getPort() >= 0) {
        req.append(':').append(port);
      }
      req.append("\r\nConnection: close\r\n");
      headers.forEach(
          (k, vs) -> vs.forEach(v -> req.append(k).append(": ").append(v).append("\r\n")));
      req.append("\r\n");
      OutputStream out = conn.getOutputStream();
      out.write(req.toString().getBytes(StandardCharsets.ISO_8859_1));
      out.flush();
      In in = new In(conn, deadline);
      while (true) {
        int status = statusLine(in.line(MAX_HEAD));
        Map<String, List<String>> h = headers(in);
        if (status >= 100 && status < 200) {
          continue; // an interim answer: the real one follows.
        }
        if (status == 204 || status == 304) {
          return new Response(status, h, new byte[0]);
        }
        return new Response(status, h, body(in, h, maxBody));
      }
    } finally {
      inFlight = null;
    }
  }

  private int millisLeft(long deadline) throws SocketTimeoutException {
    long left = deadline - nanoClock.getAsLong();
    if (left <= 0) {
      throw new SocketTimeoutException("hints: fetch timed out");
    }
    // At least 1 ms: 0 would mean no timeout at all.
    return (int) Math.max(1, Math.min(Integer.MAX_VALUE, left / 1_000_000));
  }

  private static int statusLine(String line) throws IOException {
    // HTTP/1.1 200 OK
    if (!line.startsWith("HTTP/1.") || line.length() < 12 || line.charAt(8) != ' ') {
      throw new IOException("hints: not an HTTP/1.x answer");
    }
    try {
      return Integer.parseInt(line.substring(9, 12));
    } catch (NumberFormatException e) {
      throw new IOException("hints: bad status line", e);
    }
  }

  private static Map<String, List<String>> headers(In in) throws IOException {
    Map<String, List<String>> h = new LinkedHashMap<>();
    int total = 0;
    while (true) {
      String line = in.line(MAX_HEAD - total);
      total += line.length() + 2;
      if (line.isEmpty()) {
        return h;
      }
      int colon = line.indexOf(':');
      if (colon <= 0) {
        throw new IOException("hints: malformed header line");
      }
      h.computeIfAbsent(
              line.substring(0, colon).trim().toLowerCase(Locale.ROOT), k -> new ArrayList<>(1))
          .add(line.substring(colon + 1).trim());
    }
  }

  private static byte[] body(In in, Map<String, List<String>> h, int max) throws IOException {
    List<String> te = h.get("transfer-encoding");
    if (te != null && String.join(",", te).toLowerCase(Locale.ROOT).contains("chunked")) {
      return chunked(in, max);
    }
    List<String> cl = h.get("content-length");
    if (cl != null) {
      long n;
      try {
        n = Long.parseLong(cl.get(0).trim());
      } catch (NumberFormatException e) {
        throw new IOException("hints: bad Content-Length", e);
      }
      if (n < 0) {
        throw new IOException("hints: bad Content-Length");
      }
      if (n > max) {
        return null;
      }
      byte[] b = in.exactly((int) n);
      return b;
    }
    return in.toEof(max);
  }

  private static byte[] chunked(In in, int max) throws IOException {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    while (true) {
      String line = in.line(1024);
      int semi = line.indexOf(';');
      String hex = (semi >= 0 ? line.substring(0, semi) : line).trim();
      long n;
      try {
        n = Long.parseLong(hex, 16);
      } catch (NumberFormatException e) {
        throw new IOException("hints: bad chunk size", e);
      }
      if (n < 0) {
        throw new IOException("hints: bad chunk size");
      }
      if (n == 0) {
        return out.toByteArray(); // trailers, if any, are not read: the connection closes.
      }
      if (out.size() + n > max) {
        return null;
      }
      out.writeBytes(in.exactly((int) n));
      if (!in.line(2).isEmpty()) {
        throw new IOException("hints: chunk without its CRLF");
      }
    }
  }

  /** Reads from the socket, each read bounded by what is left of the deadline. */
  private final class In {
    private final Socket socket;
    private final InputStream in;
    private final long deadline;
    private final byte[] buf = new byte[8192];
    private int pos;
    private int lim;

    In(Socket socket, long deadline) throws IOException {
      this.socket = socket;
      this.in = socket.getInputStream();
      this.deadline = deadline;
    }

    /** Fills buf; false at EOF. */
    private boolean fill() throws IOException {
      socket.setSoTimeout(millisLeft(deadline));
      int n = in.read(buf);
      if (n < 0) {
        return false;
      }
      pos = 0;
      lim = n;
      return true;
    }

    String line(int max) throws IOException {
      ByteArrayOutputStream b = new ByteArrayOutputStream();
      while (true) {
        if (pos == lim && !fill()) {
          throw new IOException("hints: connection closed mid-answer");
        }
        byte c = buf[pos++];
        if (c == '\n') {
          byte[] a = b.toByteArray();
          int len = a.length > 0 && a[a.length - 1] == '\r' ? a.length - 1 : a.length;
          return new String(a, 0, len, StandardCharsets.ISO_8859_1);
        }
        if (b.size() >= max) {
          throw new IOException("hints: answer head too long");
        }
        b.write(c);
      }
    }

    byte[] exactly(int n) throws IOException {
      byte[] out = new byte[n];
      int got = 0;
      while (got < n) {
        if (pos == lim && !fill()) {
          throw new IOException("hints: body shorter than announced");
        }
        int k = Math.min(n - got, lim - pos);
        System.arraycopy(buf, pos, out, got, k);
        pos += k;
        got += k;
      }
      return out;
    }

    byte[] toEof(int max) throws IOException {
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      while (true) {
        if (pos == lim && !fill()) {
          return out.toByteArray();
        }
        if (out.size() + (lim - pos) > max) {
          return null;
        }
        out.write(buf, pos, lim - pos);
        pos = lim;
      }
    }
  }
}
