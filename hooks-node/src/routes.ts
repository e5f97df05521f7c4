// SPDX-License-Identifier: Apache-2.0

/**
 * Matching route templates, as each framework's OpenTelemetry
 * instrumentation names a server span's http.route, to concrete operations
 * ("METHOD /concrete/path"): conformance/routes.json.
 */

const LITERAL = 0;
const ONE = 1; // a parameter: one non-empty segment
const REST = 2; // a wildcard: the rest of the path, empty or not
const END = 3; // {$}: the end of the path

function cut(s: string, sep: string): [string, string, boolean] {
  const i = s.indexOf(sep);
  return i < 0 ? [s, '', false] : [s.slice(0, i), s.slice(i + sep.length), true];
}

function segmentKind(seg: string): number {
  if (seg === '') return LITERAL;
  if (seg === '{$}') return END;
  const c = seg[0];
  if (c === '*') return REST;
  if (c === ':' && seg.length > 1) return ONE;
  const last = seg[seg.length - 1];
  if (c === '{' && last === '}' && seg.length > 2) {
    const inner = seg.slice(1, -1);
    if (inner.endsWith('...') || inner.startsWith('*') || inner.endsWith(':path')) return REST;
    return ONE;
  }
  if (c === '<' && last === '>' && seg.length > 2) {
    return seg.startsWith('<path:') ? REST : ONE;
  }
  return LITERAL;
}

function matchPath(pattern: string, path: string): boolean {
  let more = true; // path has a segment left
  for (;;) {
    const [seg, prest, pmore] = cut(pattern, '/');
    const kind = segmentKind(seg);
    if (!pmore && seg === '') return more; // "…/": the subtree below
    if (kind === END) return more && path === '';
    if (!more) return false;
    if (kind === REST) return true;
    const [qseg, qrest, qmore] = cut(path, '/');
    if (kind === ONE) {
      if (qseg === '') return false;
    } else if (seg !== qseg) {
      return false;
    }
    if (!pmore) return !qmore;
    pattern = prest;
    path = qrest;
    more = qmore;
  }
}

/**
 * Whether a route pattern ("GET /users/:id", "/items/{id}", "shop.Cart/Add")
 * matches an operation ("GET /users/42?x=1"): equal, or the pattern's method
 * (if it has one) is the operation's and its path template matches the
 * operation's path without query or fragment.
 */
export function matchOperation(pattern: string, op: string): boolean {
  if (pattern === op) return true;
  let [pm, pp, ok] = cut(pattern, ' ');
  if (!ok) {
    pm = '';
    pp = pattern;
  }
  let [om, opath, ok2] = cut(op, ' ');
  if (!ok2) {
    om = '';
    opath = op;
  }
  if (pm !== '' && pm !== om) return false;
  const q = opath.search(/[?#]/);
  if (q >= 0) opath = opath.slice(0, q);
  if (!opath.startsWith('/') || pp === '') return false;
  return matchPath(pp.startsWith('/') ? pp.slice(1) : pp, opath.slice(1));
}
