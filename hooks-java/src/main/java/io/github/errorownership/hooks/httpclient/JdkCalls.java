// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks.httpclient;

import io.github.errorownership.hooks.OwnershipNames;
import io.github.errorownership.hooks.internal.HttpRules;
import java.io.Closeable;
import java.io.IOException;
import java.io.InputStream;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.stream.Stream;

/**
 * What {@link ErrorOwnershipHttpClient} and the agent extension's {@code HttpClient.send} loop both
 * do with java.net.http's requests and responses. Not an API of its own: use the client.
 */
public final class JdkCalls {
  private JdkCalls() {}

  /** The default retry policy: an idempotent method or an idempotency key. */
  public static boolean idempotent(HttpRequest r) {
    return HttpRules.idempotentMethod(r.method())
        || r.headers().firstValue("Idempotency-Key").isPresent()
        || r.headers().firstValue("X-Idempotency-Key").isPresent();
  }

  /** A builder of {@code request} as attempt {@code n} sends it: Retry-Attempt on retries. */
  public static HttpRequest.Builder attemptBuilder(HttpRequest request, int n) {
    HttpRequest.Builder b = HttpRequest.newBuilder(request, (name, value) -> true);
    if (n > 0) {
      b.setHeader(OwnershipNames.HTTP_RETRY_ATTEMPT_HEADER, Integer.toString(n));
    }
    return b;
  }

  /** Releases a failed attempt's body, if the handler left one open. */
  public static void discard(HttpResponse<?> res) {
    if (res == null) {
      return;
    }
    Object body = res.body();
    try {
      if (body instanceof InputStream in) {
        in.close();
      } else if (body instanceof Stream<?> s) {
        s.close();
      } else if (body instanceof Closeable c) {
        c.close();
      }
    } catch (IOException | RuntimeException ignored) {
      // nothing to do: the body is dropped either way
    }
  }
}
