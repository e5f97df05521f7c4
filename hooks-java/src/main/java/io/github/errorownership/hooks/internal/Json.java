// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks.internal;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A small strict JSON reader: objects are {@code Map<String,Object>}, arrays {@code List<Object>},
 * numbers {@code Double} (or {@code Long} when integral and in range, with their text kept by
 * {@link Num}), strings, booleans and {@code null}. Nesting is bounded. Internal: not API.
 */
public final class Json {
  /** A number, with its source text. */
  public static final class Num {
    public final String text;
    public final double value;

    Num(String text) {
      this.text = text;
      this.value = Double.parseDouble(text);
    }

    /** Returns the value as an integer, or null if it is not one (fractions, exponents, range). */
    public Long asLong() {
      for (int i = 0; i < text.length(); i++) {
        char c = text.charAt(i);
        if (c == '.' || c == 'e' || c == 'E') {
          return null;
        }
      }
      try {
        return Long.parseLong(text);
      } catch (NumberFormatException e) {
        return null;
      }
    }
  }

  private static final int MAX_DEPTH = 64;
  private static final Object NULL = new Object();

  private final String s;
  private int i;

  private Json(String s) {
    this.s = s;
  }

  /** Parses {@code s}; throws {@link IllegalArgumentException} on anything but one JSON value. */
  public static Object parse(String s) {
    Json j = new Json(s);
    j.ws();
    Object v = j.value(0);
    j.ws();
    if (j.i != s.length()) {
      throw new IllegalArgumentException("trailing data at " + j.i);
    }
    return v == NULL ? null : v;
  }

  private IllegalArgumentException err(String what) {
    return new IllegalArgumentException(what + " at " + i);
  }

  private void ws() {
    while (i < s.length()) {
      char c = s.charAt(i);
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        i++;
      } else {
        break;
      }
    }
  }

  private Object value(int depth) {
    if (depth > MAX_DEPTH) {
      throw err("too deep");
    }
    if (i >= s.length()) {
      throw err("unexpected end");
    }
    char c = s.charAt(i);
    return switch (c) {
      case '{' -> object(depth);
      case '[' -> array(depth);
      case '"' -> string();
      case 't' -> {
        literal("true");
        yield true;
      }
      case 'f' -> {
        literal("false");
        yield false;
      }
      case 'n' -> {
        literal("null");
        yield NULL;
      }
      default -> number();
    };
  }

  private void literal(String w) {
    if (!s.startsWith(w, i)) {
      throw err("bad literal");
    }
    i += w.length();
  }

  private Map<String, Object> object(int depth) {
    Map<String, Object> m = new LinkedHashMap<>();
    i++;
    ws();
    if (i < s.length() && s.charAt(i) == '}') {
      i++;
      return m;
    }
    while (true) {
      ws();
      if (i >= s.length() || s.charAt(i) != '"') {
        throw err("expected a key");
      }
      String k = string();
      ws();
      if (i >= s.length() || s.charAt(i) != ':') {
        throw err("expected :");
      }
      i++;
      ws();
      Object v = value(depth + 1);
      m.put(k, v == NULL ? null : v);
      ws();
      if (i >= s.length()) {
        throw err("unexpected end");
      }
      char c = s.charAt(i++);
      if (c == '}') {
        return m;
      }
      if (c != ',') {
        throw err("expected , or }");
      }
    }
  }

  private List<Object> array(int depth) {
    List<Object> l = new ArrayList<>();
    i++;
    ws();
    if (i < s.length() && s.charAt(i) == ']') {
      i++;
      return l;
    }
    while (true) {
      ws();
      Object v = value(depth + 1);
      l.add(v == NULL ? null : v);
      ws();
      if (i >= s.length()) {
        throw err("unexpected end");
      }
      char c = s.charAt(i++);
      if (c == ']') {
        return l;
      }
      if (c != ',') {
        throw err("expected , or ]");
      }
    }
  }

  private String string() {
    i++;
    StringBuilder b = new StringBuilder();
    while (true) {
      if (i >= s.length()) {
        throw err("unterminated string");
      }
      char c = s.charAt(i++);
      if (c == '"') {
        return b.toString();
      }
      if (c < 0x20) {
        throw err("control character in string");
      }
      if (c != '\\') {
        b.append(c);
        continue;
      }
      if (i >= s.length()) {
        throw err("unterminated escape");
      }
      char e = s.charAt(i++);
      switch (e) {
        case '"' -> b.append('"');
        case '\\' -> b.append('\\');
        case '/' -> b.append('/');
        case 'b' -> b.append('\b');
        case 'f' -> b.append('\f');
        case 'n' -> b.append('\n');
        case 'r' -> b.append('\r');
        case 't' -> b.append('\t');
        case 'u' -> {
          if (i + 4 > s.length()) {
            throw err("bad \\u escape");
          }
          try {
            b.append((char) Integer.parseInt(s.substring(i, i + 4), 16));
          } catch (NumberFormatException ex) {
            throw err("bad \\u escape");
          }
          i += 4;
        }
        default -> throw err("bad escape");
      }
    }
  }

  private Num number() {
    int start = i;
    if (i < s.length() && s.charAt(i) == '-') {
      i++;
    }
    int digits = i;
    while (i < s.length() && Character.isDigit(s.charAt(i)) && s.charAt(i) < 128) {
      i++;
    }
    if (i == digits) {
      throw err("bad value");
    }
    if (s.charAt(digits) == '0' && i - digits > 1) {
      throw err("leading zero");
    }
    if (i < s.length() && s.charAt(i) == '.') {
      i++;
      int f = i;
      while (i < s.length() && s.charAt(i) >= '0' && s.charAt(i) <= '9') {
        i++;
      }
      if (i == f) {
        throw err("bad fraction");
      }
    }
    if (i < s.length() && (s.charAt(i) == 'e' || s.charAt(i) == 'E')) {
      i++;
      if (i < s.length() && (s.charAt(i) == '+' || s.charAt(i) == '-')) {
        i++;
      }
      int f = i;
      while (i < s.length() && s.charAt(i) >= '0' && s.charAt(i) <= '9') {
        i++;
      }
      if (i == f) {
        throw err("bad exponent");
      }
    }
    return new Num(s.substring(start, i));
  }
}
