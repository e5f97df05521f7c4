// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.javaagent.bootstrap;

import io.github.errorownership.hooks.Claim;
import io.github.errorownership.hooks.Ledger;
import io.github.errorownership.hooks.Outcome;
import io.github.errorownership.hooks.OwnershipNames;
import io.github.errorownership.hooks.RetryDecision;
import io.github.errorownership.hooks.internal.HttpRules;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.common.Attributes;
import io.opentelemetry.api.common.AttributesBuilder;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.ContextKey;
import io.opentelemetry.instrumentation.api.instrumenter.AttributesExtractor;
import io.opentelemetry.instrumentation.api.instrumenter.ContextCustomizer;
import java.net.HttpURLConnection;
import java.net.URI;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Added to every HTTP (and RPC) client instrumenter of the agent (java-http-client,
 * http-url-connection, okhttp, apache-httpclient, …): each call the agent sees is recorded in the
 * request's ledger, so that calls through libraries the hooks do not retry still decide the claim.
 * An attempt of a call the hooks retry ({@link LoopCall}) is decided at the end of its span, and
 * its attributes set on it, once.
 */
public final class ClientAttempts
    implements AttributesExtractor<Object, Object>, ContextCustomizer<Object> {
  private static final ContextKey<Plain> PLAIN = ContextKey.named("errorownership-agent-plain");
  private static final AttributeKey<String> URL_FULL = AttributeKey.stringKey("url.full");
  private static final AttributeKey<String> METHOD = AttributeKey.stringKey("http.request.method");
  private static final AttributeKey<Long> RESEND_COUNT =
      AttributeKey.longKey("http.request.resend_count");
  private static final AttributeKey<Long> STATUS =
      AttributeKey.longKey("http.response.status_code");

  /** For the HTTP client instrumenters: the attempts the hooks retry, and every other call. */
  public static final ClientAttempts INSTANCE = new ClientAttempts(true);

  /**
   * For the RPC client instrumenters (gRPC): the attempts the hooks retry only, as the library's
   * interceptor records no streaming call.
   */
  public static final ClientAttempts RPC = new ClientAttempts(false);

  private final boolean plain;

  private ClientAttempts(boolean plain) {
    this.plain = plain;
  }

  @Override
  public Context onStart(Context parent, Object request, Attributes startAttributes) {
    if (!plain || parent.get(LoopCall.KEY) != null || parent.get(PLAIN) != null) {
      return parent;
    }
    Ledger ledger = Ledger.fromContext(parent);
    if (ledger == null) {
      return parent;
    }
    String url = startAttributes.get(URL_FULL);
    String method = startAttributes.get(METHOD);
    String peer = "";
    String op = "";
    try {
      URI uri = URI.create(url == null ? "" : url);
      peer = HttpRules.peerAddress(uri);
      op = HttpRules.operation(method == null ? "GET" : method, uri);
    } catch (RuntimeException e) {
      // an address the hooks cannot read: the call still counts, under an empty peer
    }
    return parent.with(PLAIN, new Plain(ledger, peer, op));
  }

  @Override
  public void onStart(AttributesBuilder attributes, Context parent, Object request) {
    // The instrumentations that count resends themselves (okhttp) have put the count by now.
    LoopCall call = parent.get(LoopCall.KEY);
    if (call != null && attributes instanceof Attributes a && a.get(RESEND_COUNT) != null) {
      call.resendCounted();
    }
  }

  @Override
  public void onEnd(
      AttributesBuilder attributes,
      Context context,
      Object request,
      Object response,
      Throwable error) {
    try {
      LoopCall call = context.get(LoopCall.KEY);
      if (call != null) {
        call.onSpanEnd(attributes, response, error);
        return;
      }
      Plain plain = context.get(PLAIN);
      if (plain != null) {
        plain.end(attributes, request, response, error);
      }
    } catch (RuntimeException e) {
      // never fail a request for the hooks' sake
    }
  }

  /** A call the hooks do not retry: recorded as it ended, with the claim it carried. */
  private static final class Plain {
    private final Ledger ledger;
    private final String peer;
    private final String op;
    private final int call;
    private boolean ended;

    Plain(Ledger ledger, String peer, String op) {
      this.ledger = ledger;
      this.peer = peer;
      this.op = op;
      this.call = ledger.begin(peer);
    }

    synchronized void end(
        AttributesBuilder attributes, Object request, Object response, Throwable error) {
      if (ended) {
        return;
      }
      ended = true;
      int status = status(attributes, response);
      if (error == null && status > 0 && !HttpRules.serverFault(status)) {
        ledger.end(call, Outcome.succeeded(peer, op));
        return;
      }
      Claim received = error == null ? claim(request) : Claim.MISSING;
      ledger.end(call, Outcome.failed(peer, op, received, RetryDecision.NONE));
    }
  }

  private static int status(AttributesBuilder attributes, Object response) {
    if (response instanceof Integer code) {
      return code;
    }
    // The HTTP attributes extractor, before this one, has put the status code.
    if (attributes instanceof Attributes a) {
      Long code = a.get(STATUS);
      if (code != null) {
        return code.intValue();
      }
    }
    return response == null ? -1 : 0;
  }

  /**
   * The Error-Claim values of a response, for the client libraries whose types the bootstrap class
   * loader sees (java.base); others read as missing.
   */
  private static Claim claim(Object request) {
    if (request instanceof HttpURLConnection c) {
      List<String> values = new ArrayList<>();
      for (Map.Entry<String, List<String>> e : c.getHeaderFields().entrySet()) {
        if (e.getKey() != null && e.getKey().equalsIgnoreCase(OwnershipNames.HTTP_CLAIM_HEADER)) {
          values.addAll(e.getValue());
        }
      }
      return Claim.parse(values);
    }
    return Claim.MISSING;
  }
}
