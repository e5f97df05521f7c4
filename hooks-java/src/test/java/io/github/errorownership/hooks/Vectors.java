// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks;

import io.github.errorownership.hooks.internal.Json;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.params.provider.Arguments;

/**
 * Reads the conformance vectors from CONFORMANCE_DIR (env or system property) or ../conformance.
 */
public final class Vectors {
  private Vectors() {}

  public static Path dir() {
    String d = System.getProperty("CONFORMANCE_DIR");
    if (d == null || d.isEmpty()) {
      d = System.getenv("CONFORMANCE_DIR");
    }
    if (d == null || d.isEmpty()) {
      d = "../conformance";
    }
    return Paths.get(d);
  }

  @SuppressWarnings("unchecked")
  public static Map<String, Object> load(String file) {
    try {
      String s = Files.readString(dir().resolve(file), StandardCharsets.UTF_8);
      return (Map<String, Object>) Json.parse(s);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** The cases at path (keys) in file, as (name, case) arguments. */
  public static Stream<Arguments> cases(String file, String... path) {
    Object v = load(file);
    for (String k : path) {
      v = ((Map<?, ?>) v).get(k);
    }
    List<Arguments> out = new ArrayList<>();
    for (Object c : (List<?>) v) {
      Map<?, ?> m = (Map<?, ?>) c;
      Object name = m.containsKey("name") ? m.get("name") : m.get("framework");
      out.add(Arguments.of(String.valueOf(name), m));
    }
    if (out.isEmpty()) {
      throw new IllegalStateException("no cases in " + file);
    }
    return out.stream();
  }

  @SuppressWarnings("unchecked")
  public static Map<String, Object> map(Object m, String k) {
    Object v = ((Map<?, ?>) m).get(k);
    return v == null ? Map.of() : (Map<String, Object>) v;
  }

  @SuppressWarnings("unchecked")
  public static List<Object> list(Object m, String k) {
    Object v = ((Map<?, ?>) m).get(k);
    return v == null ? List.of() : (List<Object>) v;
  }

  public static String str(Object m, String k) {
    Object v = ((Map<?, ?>) m).get(k);
    return v == null ? null : (String) v;
  }

  public static boolean bool(Object m, String k) {
    return Boolean.TRUE.equals(((Map<?, ?>) m).get(k));
  }

  public static double num(Object m, String k, double dflt) {
    Object v = ((Map<?, ?>) m).get(k);
    return v == null ? dflt : ((Json.Num) v).value;
  }

  public static long lng(Object m, String k, long dflt) {
    Object v = ((Map<?, ?>) m).get(k);
    if (v == null) {
      return dflt;
    }
    Long l = ((Json.Num) v).asLong();
    return l == null ? Long.MAX_VALUE : l;
  }

  /** A JSON value as the span attribute would hold it: numbers as Long, strings as String. */
  public static Object plain(Object v) {
    if (v instanceof Json.Num num) {
      Long l = num.asLong();
      return l != null ? (Object) l : (Object) num.value;
    }
    return v;
  }

  public static BudgetLimits limits(Object m) {
    return new BudgetLimits(num(m, "ratio", 0), num(m, "min_retries_per_second", 0));
  }
}
