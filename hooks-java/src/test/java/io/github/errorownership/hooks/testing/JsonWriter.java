// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks.testing;

import io.github.errorownership.hooks.internal.Json;
import java.util.List;
import java.util.Map;

/** Writes what {@link Json} parsed back as JSON, numbers as their source text. */
public final class JsonWriter {
  private JsonWriter() {}

  public static String write(Object v) {
    StringBuilder b = new StringBuilder();
    write(b, v);
    return b.toString();
  }

  private static void write(StringBuilder b, Object v) {
    if (v == null) {
      b.append("null");
    } else if (v instanceof Json.Num num) {
      b.append(num.text);
    } else if (v instanceof Boolean) {
      b.append(v);
    } else if (v instanceof String s) {
      b.append('"');
      for (int i = 0; i < s.length(); i++) {
        char c = s.charAt(i);
        if (c == '"' || c == '\\') {
          b.append('\\').append(c);
        } else if (c < 0x20) {
          b.append(String.format("\\u%04x", (int) c));
        } else {
          b.append(c);
        }
      }
      b.append('"');
    } else if (v instanceof Map) {
      b.append('{');
      boolean first = true;
      for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
        if (!first) {
          b.append(',');
        }
        first = false;
        write(b, e.getKey());
        b.append(':');
        write(b, e.getValue());
      }
      b.append('}');
    } else if (v instanceof List) {
      b.append('[');
      boolean first = true;
      for (Object o : (List<?>) v) {
        if (!first) {
          b.append(',');
        }
        first = false;
        write(b, o);
      }
      b.append(']');
    } else {
      throw new IllegalArgumentException(v.getClass().toString());
    }
  }
}
