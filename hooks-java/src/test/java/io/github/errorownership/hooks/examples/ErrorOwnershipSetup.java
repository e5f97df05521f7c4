// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks.examples;

import io.github.errorownership.hooks.hints.HintsClient;
import io.github.errorownership.hooks.servlet.ErrorOwnershipFilter;
import jakarta.servlet.DispatcherType;
import jakarta.servlet.ServletContextEvent;
import jakarta.servlet.ServletContextListener;
import jakarta.servlet.annotation.WebListener;
import java.util.EnumSet;

// region container
/** Adds the hooks' filter to a web application deployed in a servlet container (Tomcat, …). */
@WebListener
public final class ErrorOwnershipSetup implements ServletContextListener {
  private HintsClient hints;

  @Override
  public void contextInitialized(ServletContextEvent event) {
    hints = HintsClient.builder("http://otel-collector:4320", "checkout").build().start();
    event
        .getServletContext()
        .addFilter("errorownership", ErrorOwnershipFilter.builder().setHints(hints).build())
        .addMappingForUrlPatterns(EnumSet.of(DispatcherType.REQUEST), true, "/*");
  }

  @Override
  public void contextDestroyed(ServletContextEvent event) {
    hints.close();
  }
}
// endregion
