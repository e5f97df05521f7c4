package io.github.errorownership.hooks.internal;

import java.net.URI;
import java.util.Locale;

/** HTTP naming rules shared by the HTTP hooks. Internal: not part of the API. */
public final class HttpRules {
  private HttpRules() {}

  /** GET HEAD OPTIONS TRACE PUT DELETE are idempotent. */
  public static boolean idempotentMethod(String method) {
    switch (method == null ? "" : method) {
      case "":
      case "GET":
      case "HEAD":
      case "OPTIONS":
      case "TRACE":
      case "PUT":
      case "DELETE":
        return true;
      default:
        return false;
    }
  }

  /** 500 and above are server faults. */
  public static boolean serverFault(int status) {
    return status >= 500;
  }

  /**
   * Names the callee as the OpenTelemetry HTTP client instrumentation does (server.address and
   * server.port): the host, with the port when it is not the scheme's default.
   */
  public static String peerAddress(URI uri) {
    String host = uri.getHost();
    if (host == null) {
      host = uri.getAuthority() == null ? "" : uri.getAuthority();
    }
    if (host.startsWith("[") && host.endsWith("]")) {
      host = host.substring(1, host.length() - 1);
    }
    int port = uri.getPort();
    String scheme = uri.getScheme() == null ? "" : uri.getScheme().toLowerCase(Locale.ROOT);
    if (port < 0 || (port == 80 && scheme.equals("http")) || (port == 443 && scheme.equals("https"))) {
      return host;
    }
    return (host.indexOf(':') >= 0 ? "[" + host + "]" : host) + ":" + port;
  }

  /** Names a request "METHOD /path", as the hints match to a route. */
  public static String operation(String method, URI uri) {
    String path = uri.getRawPath();
    return method + " " + (path == null || path.isEmpty() ? "/" : path);
  }
}
