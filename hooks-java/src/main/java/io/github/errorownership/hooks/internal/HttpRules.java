// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks.internal;

import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.context.Context;
import java.net.URI;
import java.util.Locale;

/** HTTP naming rules shared by the HTTP hooks. Internal: not part of the API. */
public final class HttpRules {
  private static final AttributeKey<String> METHOD = AttributeKey.stringKey("http.request.method");
  private static final AttributeKey<String> SERVER_ADDRESS =
      AttributeKey.stringKey("server.address");
  private static final AttributeKey<Long> SERVER_PORT = AttributeKey.longKey("server.port");
  private static final AttributeKey<String> URL_FULL = AttributeKey.stringKey("url.full");
  private static final AttributeKey<Long> STATUS =
      AttributeKey.longKey("http.response.status_code");
  private static final AttributeKey<String> ERROR_TYPE = AttributeKey.stringKey("error.type");

  private HttpRules() {}

  /**
   * Starts an attempt's CLIENT span, named and attributed by the HTTP semantic conventions, or
   * returns null without a tracer. {@code port} is left out when not above 0.
   */
  public static Span startAttemptSpan(
      Tracer tracer, Context parent, String method, String url, String host, int port) {
    if (tracer == null) {
      return null;
    }
    Span span =
        tracer
            .spanBuilder(method)
            .setSpanKind(SpanKind.CLIENT)
            .setParent(parent)
            .setAttribute(METHOD, method)
            .setAttribute(URL_FULL, url)
            .startSpan();
    if (host != null) {
      span.setAttribute(SERVER_ADDRESS, host);
    }
    if (port > 0) {
      span.setAttribute(SERVER_PORT, (long) port);
    }
    return span;
  }

  /**
   * Ends an attempt's span (if any) with its status, {@code status} not above 0 when the attempt
   * got no response, and then {@code error} its cause.
   */
  public static void endAttemptSpan(Span span, int status, Throwable error) {
    if (span == null) {
      return;
    }
    if (status > 0) {
      span.setAttribute(STATUS, (long) status);
      if (serverFault(status)) {
        span.setAttribute(ERROR_TYPE, Integer.toString(status));
        span.setStatus(StatusCode.ERROR);
      }
    } else if (error != null) {
      span.setAttribute(ERROR_TYPE, error.getClass().getName());
      span.setStatus(StatusCode.ERROR);
    }
    span.end();
  }

  /** GET HEAD OPTIONS TRACE PUT DELETE are idempotent. */
  public static boolean idempotentMethod(String method) {
    return switch (method == null ? "" : method) {
      case "", "GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE" -> true;
      default -> false;
    };
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
    if (port < 0
        || (port == 80 && scheme.equals("http"))
        || (port == 443 && scheme.equals("https"))) {
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
