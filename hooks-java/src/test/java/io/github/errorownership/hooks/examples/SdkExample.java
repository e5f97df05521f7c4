// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks.examples;

import io.github.errorownership.hooks.grpc.ErrorOwnershipClientInterceptor;
import io.github.errorownership.hooks.hints.HintsClient;
import io.github.errorownership.hooks.httpclient.ErrorOwnershipHttpClient;
import io.github.errorownership.hooks.okhttp.ErrorOwnershipInterceptor;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.common.Attributes;
import io.opentelemetry.api.trace.propagation.W3CTraceContextPropagator;
import io.opentelemetry.context.propagation.ContextPropagators;
import io.opentelemetry.exporter.otlp.http.trace.OtlpHttpSpanExporter;
import io.opentelemetry.sdk.OpenTelemetrySdk;
import io.opentelemetry.sdk.resources.Resource;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.export.BatchSpanProcessor;
import java.net.http.HttpClient;
import okhttp3.OkHttpClient;

/** hooks-java/README.md, "With the OpenTelemetry SDK": the SDK set up in code, and the clients. */
final class SdkExample {
  final OpenTelemetrySdk sdk;
  final HintsClient hints;
  final HttpClient http;
  final OkHttpClient ok;
  final ManagedChannel channel;

  SdkExample(String collector, String hintsUrl) {
    // region sdk
    OpenTelemetrySdk sdk =
        OpenTelemetrySdk.builder()
            .setTracerProvider(
                SdkTracerProvider.builder()
                    .setResource(
                        Resource.getDefault()
                            .merge(
                                Resource.create(
                                    Attributes.of(
                                        AttributeKey.stringKey("service.name"), "checkout"))))
                    .addSpanProcessor(
                        BatchSpanProcessor.builder(
                                OtlpHttpSpanExporter.builder()
                                    .setEndpoint(collector + "/v1/traces")
                                    .build())
                            .build())
                    .build())
            .setPropagators(ContextPropagators.create(W3CTraceContextPropagator.getInstance()))
            .buildAndRegisterGlobal();
    // close() flushes the batch processor: without it the spans of the last seconds are lost.
    Runtime.getRuntime().addShutdownHook(new Thread(sdk::close));
    // endregion
    this.sdk = sdk;

    // region clients
    HintsClient hints = HintsClient.builder(hintsUrl, "checkout").build().start();
    // java.net.http…
    HttpClient http =
        ErrorOwnershipHttpClient.builder(HttpClient.newHttpClient())
            .setHints(hints)
            .setOpenTelemetry(sdk)
            .build();
    // …OkHttp (an application interceptor)…
    OkHttpClient ok =
        new OkHttpClient.Builder()
            .addInterceptor(
                ErrorOwnershipInterceptor.builder().setHints(hints).setOpenTelemetry(sdk).build())
            .build();
    // …and gRPC.
    ManagedChannel channel =
        ManagedChannelBuilder.forTarget("stock:443")
            .intercept(
                ErrorOwnershipClientInterceptor.builder()
                    .setHints(hints)
                    .setOpenTelemetry(sdk)
                    .build())
            .build();
    // endregion
    this.hints = hints;
    this.http = http;
    this.ok = ok;
    this.channel = channel;
  }
}
