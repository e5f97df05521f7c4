// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks.testing;

import jakarta.servlet.DispatcherType;
import jakarta.servlet.Filter;
import jakarta.servlet.http.HttpServlet;
import java.util.EnumSet;
import org.eclipse.jetty.ee10.servlet.FilterHolder;
import org.eclipse.jetty.ee10.servlet.ServletContextHandler;
import org.eclipse.jetty.ee10.servlet.ServletHolder;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;

/** An embedded Jetty 12 on 127.0.0.1 serving one servlet behind filters. */
public final class JettyServer implements AutoCloseable {
  private final Server server;
  private final ServerConnector connector;

  public JettyServer(HttpServlet servlet, Filter... filters) throws Exception {
    server = new Server();
    connector = new ServerConnector(server, 1, 1);
    connector.setHost("127.0.0.1");
    connector.setPort(0);
    server.addConnector(connector);
    ServletContextHandler ctx = new ServletContextHandler();
    for (Filter f : filters) {
      ctx.addFilter(new FilterHolder(f), "/*", EnumSet.of(DispatcherType.REQUEST));
    }
    ctx.addServlet(new ServletHolder(servlet), "/*");
    server.setHandler(ctx);
    server.start();
  }

  public String url(String path) {
    return "http://127.0.0.1:" + connector.getLocalPort() + path;
  }

  @Override
  public void close() throws Exception {
    server.stop();
  }
}
