// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks.testing;

import io.opentelemetry.api.OpenTelemetry;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.common.Attributes;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanBuilder;
import io.opentelemetry.api.trace.SpanContext;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.api.trace.TracerProvider;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.propagation.ContextPropagators;
import io.opentelemetry.sdk.trace.data.SpanData;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * Counts how often each attribute is set on each span. The SDK this build tests with (1.68) no
 * longer counts an overwrite as a dropped attribute, but the one inside the Java agent 2.22.0 does,
 * so a hook that sets an attribute twice is caught here rather than by {@code
 * getTotalAttributeCount} alone.
 */
public final class SetOnce {
  private static final Map<String, Map<String, Integer>> SETS = new ConcurrentHashMap<>();

  private SetOnce() {}

  /** Returns otel, with every span it makes counting its attribute sets. */
  public static OpenTelemetry wrap(OpenTelemetry otel) {
    TracerProvider tp =
        new TracerProvider() {
          @Override
          public Tracer get(String name) {
            return tracer(otel.getTracerProvider().get(name));
          }

          @Override
          public Tracer get(String name, String version) {
            return tracer(otel.getTracerProvider().get(name, version));
          }
        };
    return new OpenTelemetry() {
      @Override
      public TracerProvider getTracerProvider() {
        return tp;
      }

      @Override
      public ContextPropagators getPropagators() {
        return otel.getPropagators();
      }
    };
  }

  /**
   * How often each attribute was set on the span, by key; empty for a span not made through wrap.
   */
  public static Map<String, Integer> sets(SpanData span) {
    return new TreeMap<>(SETS.getOrDefault(span.getSpanId(), Map.of()));
  }

  private static Tracer tracer(Tracer t) {
    return name -> new Builder(t.spanBuilder(name));
  }

  private static final class Builder implements SpanBuilder {
    private final SpanBuilder b;
    private final Map<String, Integer> sets = new ConcurrentHashMap<>();

    Builder(SpanBuilder b) {
      this.b = b;
    }

    @Override
    public SpanBuilder setParent(Context context) {
      b.setParent(context);
      return this;
    }

    @Override
    public SpanBuilder setNoParent() {
      b.setNoParent();
      return this;
    }

    @Override
    public SpanBuilder addLink(SpanContext spanContext) {
      b.addLink(spanContext);
      return this;
    }

    @Override
    public SpanBuilder addLink(SpanContext spanContext, Attributes attributes) {
      b.addLink(spanContext, attributes);
      return this;
    }

    @Override
    public SpanBuilder setAttribute(String key, String value) {
      return setAttribute(AttributeKey.stringKey(key), value);
    }

    @Override
    public SpanBuilder setAttribute(String key, long value) {
      return setAttribute(AttributeKey.longKey(key), value);
    }

    @Override
    public SpanBuilder setAttribute(String key, double value) {
      return setAttribute(AttributeKey.doubleKey(key), value);
    }

    @Override
    public SpanBuilder setAttribute(String key, boolean value) {
      return setAttribute(AttributeKey.booleanKey(key), value);
    }

    @Override
    public <T> SpanBuilder setAttribute(AttributeKey<T> key, T value) {
      sets.merge(key.getKey(), 1, Integer::sum);
      b.setAttribute(key, value);
      return this;
    }

    @Override
    public SpanBuilder setSpanKind(SpanKind spanKind) {
      b.setSpanKind(spanKind);
      return this;
    }

    @Override
    public SpanBuilder setStartTimestamp(long startTimestamp, TimeUnit unit) {
      b.setStartTimestamp(startTimestamp, unit);
      return this;
    }

    @Override
    public Span startSpan() {
      Span s = b.startSpan();
      SETS.put(s.getSpanContext().getSpanId(), sets);
      return new Counting(s, sets);
    }
  }

  private static final class Counting implements Span {
    private final Span s;
    private final Map<String, Integer> sets;

    Counting(Span s, Map<String, Integer> sets) {
      this.s = s;
      this.sets = sets;
    }

    @Override
    public <T> Span setAttribute(AttributeKey<T> key, T value) {
      sets.merge(key.getKey(), 1, Integer::sum);
      s.setAttribute(key, value);
      return this;
    }

    @Override
    public Span addEvent(String name, Attributes attributes) {
      s.addEvent(name, attributes);
      return this;
    }

    @Override
    public Span addEvent(String name, Attributes attributes, long timestamp, TimeUnit unit) {
      s.addEvent(name, attributes, timestamp, unit);
      return this;
    }

    @Override
    public Span setStatus(StatusCode statusCode, String description) {
      s.setStatus(statusCode, description);
      return this;
    }

    @Override
    public Span recordException(Throwable exception, Attributes additionalAttributes) {
      s.recordException(exception, additionalAttributes);
      return this;
    }

    @Override
    public Span updateName(String name) {
      s.updateName(name);
      return this;
    }

    @Override
    public void end() {
      s.end();
    }

    @Override
    public void end(long timestamp, TimeUnit unit) {
      s.end(timestamp, unit);
    }

    @Override
    public SpanContext getSpanContext() {
      return s.getSpanContext();
    }

    @Override
    public boolean isRecording() {
      return s.isRecording();
    }
  }
}
