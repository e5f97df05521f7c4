// SPDX-License-Identifier: Apache-2.0

package e2e;

import jakarta.servlet.DispatcherType;
import jakarta.servlet.Filter;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.EnumSet;
import java.util.concurrent.atomic.AtomicLong;
import org.eclipse.jetty.ee10.servlet.FilterHolder;
import org.eclipse.jetty.ee10.servlet.ServletContextHandler;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;

/**
 * The Java service of the polyglot chain (orders): a servlet on embedded
 * Jetty, run under the OpenTelemetry Java agent. It has no hooks code: run
 * alone, the zero-code chain's agent extension does their work; {@link
 * Hooked} runs it with the hooks as a library.
 */
public final class Orders {
  static final String SERVICE = System.getenv("OTEL_SERVICE_NAME");
  static final String ROUTE = System.getenv().getOrDefault("ROUTE", SERVICE);
  static final String NEXT = System.getenv("NEXT");
  static volatile double rate = Double.parseDouble(System.getenv().getOrDefault("RATE", "0"));
  static final AtomicLong served = new AtomicLong();
  static final AtomicLong own = new AtomicLong();
  static final AtomicLong propagated = new AtomicLong();
  // Set once, before run, by the library variant (Hooked).
  static HttpClient client = HttpClient.newHttpClient();

  static boolean fails(String item, String attempt) {
    int h = 0x811c9dc5;
    for (byte b : (item + "/" + SERVICE + "/" + (attempt == null ? "0" : attempt)).getBytes(StandardCharsets.UTF_8)) {
      h = (h ^ (b & 0xff)) * 0x01000193;
    }
    return Integer.toUnsignedLong(h) / 4294967296.0 < rate;
  }

  static boolean ok(String url) {
    try {
      HttpResponse<Void> res = client.send(HttpRequest.newBuilder(URI.create(url)).build(), HttpResponse.BodyHandlers.discarding());
      return res.statusCode() < 500;
    } catch (IOException e) {
      return false;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return false;
    }
  }

  /** The request under test: GET /orders/{id}. */
  public static final class Work extends HttpServlet {
    @Override
    protected void doGet(HttpServletRequest req, HttpServletResponse res) throws IOException {
      String item = req.getPathInfo().substring(1);
      served.incrementAndGet();
      if (!ok(NEXT + "/" + item)) {
        propagated.incrementAndGet();
        res.sendError(502, "catalog failed");
        return;
      }
      if (fails(item, req.getHeader("Retry-Attempt"))) {
        own.incrementAndGet();
        res.sendError(500, "orders failed");
        return;
      }
      res.getWriter().println("ok");
    }
  }

  /** The test's controls: POST /admin/rate, GET /admin/counters. */
  public static final class Admin extends HttpServlet {
    @Override
    protected void doPost(HttpServletRequest req, HttpServletResponse res) throws IOException {
      rate = Double.parseDouble(req.getParameter("value"));
      res.getWriter().println("ok");
    }

    @Override
    protected void doGet(HttpServletRequest req, HttpServletResponse res) throws IOException {
      res.setContentType("application/json");
      res.getWriter().printf("{\"served\":%d,\"own\":%d,\"propagated\":%d,\"coincidental\":0}%n", served.get(), own.get(), propagated.get());
    }
  }

  public static void main(String[] args) throws Exception {
    run(null);
  }

  /** Serves until stopped, behind filter when there is one. */
  static void run(Filter filter) throws Exception {
    Server server = new Server();
    ServerConnector connector = new ServerConnector(server);
    connector.setHost("127.0.0.1");
    connector.setPort(0);
    server.addConnector(connector);
    ServletContextHandler context = new ServletContextHandler();
    if (filter != null) {
      context.addFilter(new FilterHolder(filter), "/*", EnumSet.of(DispatcherType.REQUEST));
    }
    context.addServlet(Work.class, "/" + ROUTE + "/*");
    context.addServlet(Admin.class, "/admin/rate");
    context.addServlet(Admin.class, "/admin/counters");
    server.setHandler(context);
    server.setStopAtShutdown(true);
    server.start();
    System.out.println("127.0.0.1:" + connector.getLocalPort());
    System.out.flush();
    server.join();
  }
}
