package eos.ingest.rest;

import jakarta.servlet.DispatcherType;
import jakarta.servlet.Filter;
import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.ServletRequest;
import jakarta.servlet.ServletResponse;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.apache.hadoop.conf.Configuration;
import org.apache.iceberg.CatalogProperties;
import org.apache.iceberg.CatalogUtil;
import org.apache.iceberg.catalog.Catalog;
import org.apache.iceberg.jdbc.JdbcCatalog;
import org.apache.iceberg.rest.RESTCatalogAdapter;
import org.apache.iceberg.rest.RESTCatalogServlet;
import org.eclipse.jetty.ee10.servlet.FilterHolder;
import org.eclipse.jetty.ee10.servlet.ServletContextHandler;
import org.eclipse.jetty.ee10.servlet.ServletHolder;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;

/**
 * Iceberg's REST catalog for the test stack: Iceberg's own request handling (RESTCatalogAdapter and
 * RESTCatalogServlet, what Iceberg's RESTCatalogServer serves) over a JDBC catalog on a SQLite file,
 * with two things that server lacks: it listens on 127.0.0.1 only, and it authenticates as a
 * production catalog does (Iceberg's server takes any credential). The OAuth2 token endpoint
 * (POST v1/oauth/tokens, client credentials) issues a token only for the configured client id and
 * secret; every other request needs "Authorization: Bearer" with that token or the configured
 * static token, else 401 NotAuthorizedException. Configured by the environment only, so no secret
 * is on the command line: EOS_REST_PORT, EOS_REST_CATALOG_DB (the SQLite file), EOS_REST_WAREHOUSE,
 * EOS_REST_CLIENT_ID, EOS_REST_CLIENT_SECRET, EOS_REST_TOKEN (stack/iceberg-rest.sh sets them).
 */
public final class RestCatalogServer {
  private RestCatalogServer() {}

  public static void main(String[] args) throws Exception {
    int port = Integer.parseInt(required("EOS_REST_PORT"));
    Map<String, String> properties = new HashMap<>();
    properties.put(CatalogProperties.CATALOG_IMPL, JdbcCatalog.class.getName());
    properties.put(CatalogProperties.URI, "jdbc:sqlite:" + required("EOS_REST_CATALOG_DB"));
    properties.put(CatalogProperties.WAREHOUSE_LOCATION, required("EOS_REST_WAREHOUSE"));
    properties.put("jdbc.schema-version", "V1"); // as RESTCatalogServer: views too
    Catalog catalog = CatalogUtil.buildIcebergCatalog("rest_backend", properties, new Configuration());

    Server server = new Server();
    ServerConnector connector = new ServerConnector(server);
    connector.setHost("127.0.0.1");
    connector.setPort(port);
    server.addConnector(connector);
    ServletContextHandler context = new ServletContextHandler(ServletContextHandler.NO_SESSIONS);
    context.addServlet(new ServletHolder(new RESTCatalogServlet(new RESTCatalogAdapter(catalog))), "/*");
    Auth auth =
        new Auth(required("EOS_REST_CLIENT_ID"), required("EOS_REST_CLIENT_SECRET"), required("EOS_REST_TOKEN"));
    context.addFilter(new FilterHolder(auth), "/*", EnumSet.of(DispatcherType.REQUEST));
    server.setHandler(context);
    server.start();
    System.out.println("eos-ingest REST catalog listening on 127.0.0.1:" + port);
    server.join();
  }

  private static String required(String name) {
    String value = System.getenv(name);
    if (value == null || value.isEmpty()) {
      throw new IllegalArgumentException(name + " is not set");
    }
    return value;
  }

  /** The OAuth2 client-credentials token endpoint and the bearer-token check of every other request. */
  static final class Auth implements Filter {
    private final String clientId;
    private final String clientSecret;
    private final List<String> tokens = new ArrayList<>();

    Auth(String clientId, String clientSecret, String staticToken) {
      this.clientId = clientId;
      this.clientSecret = clientSecret;
      tokens.add(staticToken);
      tokens.add("eos-rest-" + UUID.randomUUID()); // the token this server issues
    }

    @Override
    public void doFilter(ServletRequest request, ServletResponse response, FilterChain chain)
        throws IOException, ServletException {
      HttpServletRequest http = (HttpServletRequest) request;
      HttpServletResponse out = (HttpServletResponse) response;
      if ("POST".equals(http.getMethod()) && http.getRequestURI().endsWith("/v1/oauth/tokens")) {
        if (same(clientId, http.getParameter("client_id"))
            && same(clientSecret, http.getParameter("client_secret"))) {
          send(out, 200, "{\"access_token\":\"" + tokens.get(1) + "\",\"token_type\":\"bearer\","
              + "\"issued_token_type\":\"urn:ietf:params:oauth:token-type:access_token\",\"expires_in\":3600}");
        } else {
          send(out, 401, "{\"error\":\"invalid_client\","
              + "\"error_description\":\"the client id or secret is not accepted\"}");
        }
        return;
      }
      String header = http.getHeader("Authorization");
      String token = header != null && header.startsWith("Bearer ") ? header.substring(7) : null;
      if (token != null && tokens.stream().anyMatch(t -> same(t, token))) {
        chain.doFilter(request, response);
        return;
      }
      send(out, 401, "{\"error\":{\"message\":\"" + (token == null ? "no bearer token" : "the bearer token is not accepted")
          + "\",\"type\":\"NotAuthorizedException\",\"code\":401}}");
    }

    private static boolean same(String expected, String given) {
      return given != null
          && MessageDigest.isEqual(expected.getBytes(StandardCharsets.UTF_8), given.getBytes(StandardCharsets.UTF_8));
    }

    private static void send(HttpServletResponse out, int status, String json) throws IOException {
      out.setStatus(status);
      out.setContentType("application/json");
      out.getOutputStream().write(json.getBytes(StandardCharsets.UTF_8));
    }
  }
}
