// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks.hints;

/**
 * Matches operations to route templates as each framework's OpenTelemetry instrumentation names
 * them ({@code http.route}): {@code {id}}, {@code {id:regexp}}, {@code :id}, {@code <int:id>} match
 * one non-empty segment; {@code {path...}}, {@code {p:path}}, {@code {*slug}}, {@code *}, {@code
 * *path}, {@code <path:p>} the rest of the path; {@code {$}} only the end; a pattern ending in
 * {@code /} every path below it; a path without its leading {@code /} reads as if it had it.
 */
public final class Routes {
  private static final int LITERAL = 0;
  private static final int ONE = 1;
  private static final int REST = 2;
  private static final int END = 3;

  private Routes() {}

  /** Reports whether {@code op} ("METHOD /concrete/path") is a request of {@code pattern}. */
  public static boolean matches(String pattern, String op) {
    if (pattern.equals(op)) {
      return true;
    }
    String pm = "";
    String pp = pattern;
    int sp = pattern.indexOf(' ');
    if (sp >= 0) {
      pm = pattern.substring(0, sp);
      pp = pattern.substring(sp + 1);
    }
    String om = "";
    String opath = op;
    int os = op.indexOf(' ');
    if (os >= 0) {
      om = op.substring(0, os);
      opath = op.substring(os + 1);
    }
    if (!pm.isEmpty() && !pm.equals(om)) {
      return false;
    }
    for (int i = 0; i < opath.length(); i++) {
      char c = opath.charAt(i);
      if (c == '?' || c == '#') {
        opath = opath.substring(0, i);
        break;
      }
    }
    if (!opath.startsWith("/") || pp.isEmpty()) {
      return false;
    }
    return matchPath(pp.startsWith("/") ? pp.substring(1) : pp, opath.substring(1));
  }

  private static boolean matchPath(String pattern, String path) {
    int p = 0; // position in pattern
    int q = 0; // position in path
    boolean more = true;
    while (true) {
      int pe = pattern.indexOf('/', p);
      boolean pmore = pe >= 0;
      String seg = pmore ? pattern.substring(p, pe) : pattern.substring(p);
      int kind = kind(seg);
      if (!pmore && seg.isEmpty()) {
        return more;
      }
      if (kind == END) {
        return more && q == path.length();
      }
      if (!more) {
        return false;
      }
      if (kind == REST) {
        return true;
      }
      int qe = path.indexOf('/', q);
      boolean qmore = qe >= 0;
      String qseg = qmore ? path.substring(q, qe) : path.substring(q);
      if (kind == ONE) {
        if (qseg.isEmpty()) {
          return false;
        }
      } else if (!seg.equals(qseg)) {
        return false;
      }
      if (!pmore) {
        return !qmore;
      }
      p = pe + 1;
      q = qmore ? qe + 1 : path.length();
      more = qmore;
    }
  }

  private static int kind(String seg) {
    int n = seg.length();
    if (n == 0) {
      return LITERAL;
    }
    if (seg.equals("{$}")) {
      return END;
    }
    char c = seg.charAt(0);
    if (c == '*') {
      return REST;
    }
    if (c == ':' && n > 1) {
      return ONE;
    }
    if (c == '{' && seg.charAt(n - 1) == '}' && n > 2) {
      String inner = seg.substring(1, n - 1);
      if (inner.endsWith("...") || inner.startsWith("*") || inner.endsWith(":path")) {
        return REST;
      }
      return ONE;
    }
    if (c == '<' && seg.charAt(n - 1) == '>' && n > 2) {
      return seg.startsWith("<path:") ? REST : ONE;
    }
    return LITERAL;
  }
}
