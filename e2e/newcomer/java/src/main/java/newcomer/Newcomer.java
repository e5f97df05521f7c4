// SPDX-License-Identifier: Apache-2.0

package newcomer;

import io.github.errorownership.hooks.hints.HintsClient;
import io.github.errorownership.hooks.httpclient.ErrorOwnershipHttpClient;
import io.github.errorownership.hooks.servlet.ErrorOwnershipFilter;
import io.opentelemetry.api.GlobalOpenTelemetry;
import jakarta.servlet.DispatcherType;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.EnumSet;
import java.util.List;
import java.util.Objects;
import org.eclipse.jetty.ee10.servlet.FilterHolder;
import org.eclipse.jetty.ee10.servlet.ServletContextHandler;
import org.eclipse.jetty.ee10.servlet.ServletHolder;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import sun.misc.Signal;

/**
 * A service written from hooks-java/README.md alone, run under the OpenTelemetry Java agent:
 * embedded Jetty 12 answering GET /work/{id}?fail=a,b, which calls MUST_URL and MAY_URL (when set)
 * through the hooks' HttpClient. It fails on its own (500, or 503 without dependencies) when its
 * service name is in fail, answers 502 when the must call failed, else 200.
 */
public final class Newcomer {
  static final String SERVICE = System.getenv("OTEL_SERVICE_NAME");
  static final String MUST_URL = System.getenv("MUST_URL");
  static final String MAY_URL = System.getenv("MAY_URL");

  private Newcomer() {}

  public static void main(String[] args) throws Exception {
    // region jetty
    // The hints the collector learned for this service (its hints extension, port 4320 by
    // default); a daemon thread polls them, on a plain socket the agent does not trace.
    HintsClient hints =
        HintsClient.builder(System.getenv("HINTS_URL"), System.getenv("OTEL_SERVICE_NAME"))
            .build()
            .start();
    // Outbound calls: each attempt is a CLIENT span the hooks make with the agent's SDK.
    HttpClient http =
        ErrorOwnershipHttpClient.builder(HttpClient.newHttpClient())
            .setHints(hints)
            .setOpenTelemetry(GlobalOpenTelemetry.get())
            .build();

    Server server = new Server();
    ServerConnector connector = new ServerConnector(server);
    connector.setHost("127.0.0.1");
    connector.setPort(0);
    server.addConnector(connector);
    ServletContextHandler context = new ServletContextHandler();
    // The agent's SERVER span is current inside every filter: the hooks' filter sets
    // Error-Claim on failed responses and the claim attributes on that span.
    context.addFilter(
        new FilterHolder(ErrorOwnershipFilter.builder().setHints(hints).build()),
        "/*",
        EnumSet.of(DispatcherType.REQUEST));
    context.addServlet(new ServletHolder(new Work(http)), "/work/*");
    server.setHandler(context);
    server.start();
    // endregion

    System.out.println("127.0.0.1:" + connector.getLocalPort());
    System.out.flush();
    // The JVM answers SIGTERM with status 143 after its shutdown hooks (the agent's among them,
    // which exports the last spans); the test's protocol wants 0, so stop and exit here.
    Signal.handle(
        new Signal("TERM"),
        sig -> {
          try {
            server.stop();
          } catch (Exception e) {
            e.printStackTrace();
          }
          System.exit(0);
        });
    server.join();
  }

  /** GET /work/{id}?fail=a,b. */
  static final class Work extends HttpServlet {
    private static final long serialVersionUID = 1L;
    private final transient HttpClient http;

    Work(HttpClient http) {
      this.http = http;
    }

    @Override
    protected void doGet(HttpServletRequest req, HttpServletResponse res) throws IOException {
      String id = req.getPathInfo() == null ? "" : req.getPathInfo().substring(1);
      String fail = Objects.toString(req.getParameter("fail"), "");
      String path = "/work/" + id + "?fail=" + URLEncoder.encode(fail, StandardCharsets.UTF_8);
      boolean mustFailed = MUST_URL != null && !ok(MUST_URL + path);
      if (MAY_URL != null) {
        ok(MAY_URL + path); // fail-open: its failure is tolerated
      }
      if (List.of(fail.split(",")).contains(SERVICE)) {
        res.sendError(MUST_URL == null && MAY_URL == null ? 503 : 500);
      } else if (mustFailed) {
        res.sendError(502);
      } else {
        res.setContentType("text/plain");
        res.getWriter().println("ok " + id);
      }
    }

    private boolean ok(String url) {
      try {
        HttpResponse<Void> r =
            http.send(
                HttpRequest.newBuilder(URI.create(url)).build(),
                HttpResponse.BodyHandlers.discarding());
        return r.statusCode() / 100 == 2;
      } catch (IOException e) {
        return false;
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return false;
      }
    }
  }
}
