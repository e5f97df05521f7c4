// SPDX-License-Identifier: Apache-2.0

package e2e;

import io.github.errorownership.hooks.hints.HintsClient;
import io.github.errorownership.hooks.httpclient.ErrorOwnershipHttpClient;
import io.github.errorownership.hooks.servlet.ErrorOwnershipFilter;
import io.opentelemetry.api.GlobalOpenTelemetry;
import java.net.http.HttpClient;

/**
 * {@link Orders} with the errorownership hooks as a library, as
 * hooks-java/README.md sets them up under the Java agent (which then runs
 * with -Dotel.instrumentation.java-http-client.enabled=false): the servlet
 * filter and the wrapped HttpClient (TestPolyglotChain).
 */
public final class Hooked {
  private Hooked() {}

  public static void main(String[] args) throws Exception {
    HintsClient hints = HintsClient.builder(System.getenv("HINTS_URL"), Orders.SERVICE).build().start();
    Orders.client = ErrorOwnershipHttpClient.builder(HttpClient.newHttpClient())
        .setHints(hints).setOpenTelemetry(GlobalOpenTelemetry.get()).build();
    Orders.run(ErrorOwnershipFilter.builder().setHints(hints).build());
  }
}
