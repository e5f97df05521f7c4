// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.javaagent.it;

import java.io.IOException;
import java.lang.reflect.Method;
import javax.servlet.Servlet;
import javax.servlet.http.HttpServlet;
import javax.servlet.http.HttpServletRequest;
import javax.servlet.http.HttpServletResponse;

/**
 * server.json on a javax.servlet container, Jetty 9.4 (Servlet 3.1), in a child JVM of its own
 * class path (target/javax-lib): {@code javax-server FILE [--await=K] INDEX...}, as VectorApp's
 * {@code server}.
 */
final class JavaxApp {
  private JavaxApp() {}

  public static void main(String[] args) throws Exception {
    Calls.Picks p = Calls.Picks.parse(args);
    HttpServlet servlet =
        new HttpServlet() {
          @Override
          protected void service(HttpServletRequest req, HttpServletResponse res)
              throws IOException {
            int index = Integer.parseInt(req.getPathInfo().substring(1));
            Calls.handle(p.cases(), index, false, res::addHeader, res::setStatus);
          }
        };
    // Jetty 9.4 by reflection: the test class path, which compiles this, has Jetty 12.
    Class<?> serverType = Class.forName("org.eclipse.jetty.server.Server");
    Object server = serverType.getConstructor().newInstance();
    Object connector =
        Class.forName("org.eclipse.jetty.server.ServerConnector")
            .getConstructor(serverType)
            .newInstance(server);
    connector.getClass().getMethod("setHost", String.class).invoke(connector, "127.0.0.1");
    serverType
        .getMethod("addConnector", Class.forName("org.eclipse.jetty.server.Connector"))
        .invoke(server, connector);
    Class<?> contextType = Class.forName("org.eclipse.jetty.servlet.ServletContextHandler");
    Class<?> holderType = Class.forName("org.eclipse.jetty.servlet.ServletHolder");
    Object context = contextType.getConstructor().newInstance();
    Method addServlet = contextType.getMethod("addServlet", holderType, String.class);
    for (String path : new String[] {"/case/*", "/probe/*"}) {
      addServlet.invoke(
          context, holderType.getConstructor(Servlet.class).newInstance(servlet), path);
    }
    serverType
        .getMethod("setHandler", Class.forName("org.eclipse.jetty.server.Handler"))
        .invoke(server, context);
    serverType.getMethod("start").invoke(server);
    int port = (Integer) connector.getClass().getMethod("getLocalPort").invoke(connector);
    try {
      Calls.runCases("http://127.0.0.1:" + port, p.cases(), p.picks(), p.await());
    } finally {
      serverType.getMethod("stop").invoke(server);
    }
  }
}
