// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.javaagent;

import io.opentelemetry.instrumentation.api.incubator.instrumenter.InstrumenterCustomizer;
import io.opentelemetry.instrumentation.api.incubator.instrumenter.InstrumenterCustomizerProvider;
import io.opentelemetry.instrumentation.api.instrumenter.AttributesExtractor;
import io.opentelemetry.instrumentation.api.instrumenter.ContextCustomizer;

/**
 * Adds the hooks to every HTTP and RPC client instrumenter of the agent: the HTTP calls are
 * recorded in the request's ledger, and the attempts the hooks retry carry their attributes. The
 * extractor is the bootstrap class loader's (ClientAttempts), the one the servlet and java.net.http
 * helpers use.
 */
public final class ErrorOwnershipCustomizerProvider implements InstrumenterCustomizerProvider {
  @Override
  @SuppressWarnings("unchecked")
  public void customize(InstrumenterCustomizer customizer) {
    String field;
    if (customizer.hasType(InstrumenterCustomizer.InstrumentationType.HTTP_CLIENT)) {
      field = "INSTANCE";
    } else if (customizer.hasType(InstrumenterCustomizer.InstrumentationType.RPC_CLIENT)) {
      field = "RPC";
    } else {
      return;
    }
    try {
      Object attempts =
          Class.forName("io.github.errorownership.javaagent.bootstrap.ClientAttempts", true, null)
              .getField(field)
              .get(null);
      customizer.addAttributesExtractor((AttributesExtractor<Object, Object>) attempts);
      customizer.addContextCustomizer((ContextCustomizer<Object>) attempts);
    } catch (ReflectiveOperationException | LinkageError | RuntimeException e) {
      // BootstrapJar warned already: the hooks stay off
    }
  }
}
