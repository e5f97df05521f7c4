// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.javaagent;

import static net.bytebuddy.matcher.ElementMatchers.declaresField;
import static net.bytebuddy.matcher.ElementMatchers.isConstructor;
import static net.bytebuddy.matcher.ElementMatchers.isMethod;
import static net.bytebuddy.matcher.ElementMatchers.isPublic;
import static net.bytebuddy.matcher.ElementMatchers.named;
import static net.bytebuddy.matcher.ElementMatchers.takesArgument;
import static net.bytebuddy.matcher.ElementMatchers.takesArguments;

import io.github.errorownership.javaagent.servlet.ServletInstrumentation;
import io.opentelemetry.javaagent.extension.instrumentation.InstrumentationModule;
import io.opentelemetry.javaagent.extension.instrumentation.TypeInstrumentation;
import io.opentelemetry.javaagent.extension.instrumentation.TypeTransformer;
import io.opentelemetry.javaagent.extension.matcher.AgentElementMatchers;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.ArrayList;
import java.util.List;
import java.util.logging.Logger;
import net.bytebuddy.asm.Advice;
import net.bytebuddy.description.type.TypeDescription;
import net.bytebuddy.implementation.bytecode.assign.Assigner;
import net.bytebuddy.matcher.ElementMatcher;

/**
 * The hooks under the agent: Servlet responses (Jakarta and javax) and gRPC server calls claimed by
 * the rules, java.net.http (send and sendAsync), OkHttp and gRPC calls retried by them. Switched
 * off with {@code -Dotel.instrumentation.error-ownership.enabled=false} (or {@code
 * OTEL_INSTRUMENTATION_ERROR_OWNERSHIP_ENABLED=false}), like any instrumentation.
 */
public final class ErrorOwnershipInstrumentationModule extends InstrumentationModule {
  private static final Logger logger =
      Logger.getLogger(ErrorOwnershipInstrumentationModule.class.getName());

  /** The package of the javax.servlet twins of the servlet package (see pom.xml, shade javax). */
  private static final String JAVAX_SERVLET = "io.github.errorownership.javaagent.javax.servlet";

  public ErrorOwnershipInstrumentationModule() {
    super("error-ownership");
    BootstrapJar.install();
  }

  @Override
  public int order() {
    // After the agent's own modules: the advice applied later wraps the earlier.
    return 100;
  }

  @Override
  public List<TypeInstrumentation> typeInstrumentations() {
    List<TypeInstrumentation> all = new ArrayList<>();
    all.add(new ServletInstrumentation());
    try {
      // The javax.servlet twin of ServletInstrumentation, made at build time by relocation.
      all.add(
          Class.forName(JAVAX_SERVLET + ".ServletInstrumentation")
              .asSubclass(TypeInstrumentation.class)
              .getConstructor()
              .newInstance());
    } catch (ReflectiveOperationException | LinkageError | ClassCastException e) {
      logger.warning("errorownership: no javax.servlet instrumentation in the extension jar: " + e);
    }
    all.addAll(
        List.of(
            new HttpClientFacadeInstrumentation(),
            new OkHttpClientInstrumentation(),
            new GrpcChannelBuilderInstrumentation(),
            new GrpcServerBuilderInstrumentation()));
    return all;
  }

  @Override
  public List<String> getAdditionalHelperClassNames() {
    // The library's own servlet wrapper and send loop, relocated (shade rewrites these names too).
    return List.of(
        "io.github.errorownership.hooks.servlet.ClaimingResponse",
        "io.github.errorownership.hooks.httpclient.JdkCalls",
        "io.github.errorownership.javaagent.servlet.AgentResponse",
        "io.github.errorownership.javaagent.javax.hooks.servlet.ClaimingResponse",
        JAVAX_SERVLET + ".AgentResponse",
        "io.github.errorownership.javaagent.httpclient.RetryingSend",
        "io.github.errorownership.javaagent.httpclient.RetryingSend$JdkCall",
        "io.github.errorownership.hooks.okhttp.ErrorOwnershipInterceptor",
        "io.github.errorownership.javaagent.okhttp.RetryingInterceptor",
        "io.github.errorownership.javaagent.okhttp.RetryingInterceptor$OkCall",
        "io.github.errorownership.hooks.grpc.GrpcFaults",
        "io.github.errorownership.hooks.grpc.ErrorOwnershipClientInterceptor",
        "io.github.errorownership.hooks.grpc.ErrorOwnershipClientInterceptor$1",
        "io.github.errorownership.hooks.grpc.ErrorOwnershipClientInterceptor$Attempts",
        "io.github.errorownership.hooks.grpc.ErrorOwnershipClientInterceptor$AttemptsFactory",
        "io.github.errorownership.hooks.grpc.ErrorOwnershipClientInterceptor$Builder",
        "io.github.errorownership.hooks.grpc.ErrorOwnershipClientInterceptor$RetryingCall",
        "io.github.errorownership.hooks.grpc.ErrorOwnershipClientInterceptor$RetryingCall$AttemptListener",
        "io.github.errorownership.hooks.grpc.ErrorOwnershipClientInterceptor$SpanAttempts",
        "io.github.errorownership.hooks.grpc.ErrorOwnershipServerInterceptor",
        "io.github.errorownership.hooks.grpc.ErrorOwnershipServerInterceptor$1",
        "io.github.errorownership.hooks.grpc.ErrorOwnershipServerInterceptor$2",
        "io.github.errorownership.hooks.grpc.ErrorOwnershipServerInterceptor$Builder",
        "io.github.errorownership.javaagent.grpc.GrpcCall",
        "io.github.errorownership.javaagent.grpc.GrpcCall$Trailers",
        "io.github.errorownership.javaagent.grpc.GrpcCall$Tracer",
        "io.github.errorownership.javaagent.grpc.GrpcHooks");
  }

  @Override
  public boolean isHelperClass(String className) {
    return className.startsWith("io.github.errorownership.javaagent.servlet.")
        || className.startsWith("io.github.errorownership.javaagent.javax.")
        || className.startsWith("io.github.errorownership.javaagent.httpclient.")
        || className.startsWith("io.github.errorownership.javaagent.okhttp.")
        || className.startsWith("io.github.errorownership.javaagent.grpc.")
        || className.startsWith("io.github.errorownership.hooks.grpc.")
        || className.startsWith("io.github.errorownership.hooks.okhttp.ErrorOwnershipInterceptor")
        || className.startsWith("io.github.errorownership.hooks.servlet.ClaimingResponse")
        || className.startsWith("io.github.errorownership.hooks.httpclient.JdkCalls");
  }

  /**
   * HttpClientFacade.send, which the agent leaves alone: the hooks' loop calls the facade's
   * HttpClientImpl once per attempt, and the agent makes a CLIENT span of each.
   */
  public static final class HttpClientFacadeInstrumentation implements TypeInstrumentation {
    @Override
    public ElementMatcher<TypeDescription> typeMatcher() {
      return named("jdk.internal.net.http.HttpClientFacade");
    }

    @Override
    public void transform(TypeTransformer transformer) {
      transformer.applyAdviceToMethod(
          named("send")
              .and(takesArguments(2))
              .and(takesArgument(0, named("java.net.http.HttpRequest")))
              .and(isPublic()),
          ErrorOwnershipInstrumentationModule.class.getName() + "$SendAdvice");
      transformer.applyAdviceToMethod(
          named("sendAsync")
              .and(takesArgument(0, named("java.net.http.HttpRequest")))
              .and(isPublic()),
          ErrorOwnershipInstrumentationModule.class.getName() + "$SendAsyncAdvice");
    }
  }

  /** Runs the whole call in the enter advice and skips the facade's own body. */
  @SuppressWarnings("unused")
  public static final class SendAdvice {
    private SendAdvice() {}

    @Advice.OnMethodEnter(skipOn = Advice.OnNonDefaultValue.class)
    public static HttpResponse<?> enter(
        @Advice.FieldValue(value = "impl", typing = Assigner.Typing.DYNAMIC) HttpClient impl,
        @Advice.Argument(0) HttpRequest request,
        @Advice.Argument(1) HttpResponse.BodyHandler<?> handler)
        throws java.io.IOException, InterruptedException {
      return io.github.errorownership.javaagent.httpclient.RetryingSend.send(
          impl, request, handler);
    }

    @Advice.OnMethodExit
    public static void exit(
        @Advice.Enter HttpResponse<?> sent,
        @Advice.Return(readOnly = false, typing = Assigner.Typing.DYNAMIC) Object response) {
      if (sent != null) {
        response = sent;
      }
    }
  }

  /** sendAsync, with or without a push promise handler: the whole call, in the enter advice. */
  @SuppressWarnings("unused")
  public static final class SendAsyncAdvice {
    private SendAsyncAdvice() {}

    @Advice.OnMethodEnter(skipOn = Advice.OnNonDefaultValue.class)
    @SuppressWarnings({"rawtypes", "unchecked"})
    public static java.util.concurrent.CompletableFuture<?> enter(
        @Advice.FieldValue(value = "impl", typing = Assigner.Typing.DYNAMIC) HttpClient impl,
        @Advice.AllArguments Object[] args) {
      return io.github.errorownership.javaagent.httpclient.RetryingSend.sendAsync(
          impl,
          (HttpRequest) args[0],
          (HttpResponse.BodyHandler) args[1],
          args.length > 2 ? (HttpResponse.PushPromiseHandler) args[2] : null);
    }

    @Advice.OnMethodExit
    public static void exit(
        @Advice.Enter java.util.concurrent.CompletableFuture<?> sent,
        @Advice.Return(readOnly = false, typing = Assigner.Typing.DYNAMIC) Object response) {
      if (sent != null) {
        response = sent;
      }
    }
  }

  /**
   * The OkHttpClient constructor, where the agent adds its interceptors to the builder: the hooks'
   * retry loop goes after them, so each attempt passes the agent's tracing network interceptor.
   */
  public static final class OkHttpClientInstrumentation implements TypeInstrumentation {
    @Override
    public ElementMatcher<TypeDescription> typeMatcher() {
      return named("okhttp3.OkHttpClient");
    }

    @Override
    public void transform(TypeTransformer transformer) {
      transformer.applyAdviceToMethod(
          isConstructor()
              .and(takesArguments(1))
              .and(takesArgument(0, named("okhttp3.OkHttpClient$Builder"))),
          ErrorOwnershipInstrumentationModule.class.getName() + "$OkHttpAdvice");
    }
  }

  /** Adds the retry loop once per builder. */
  @SuppressWarnings("unused")
  public static final class OkHttpAdvice {
    private OkHttpAdvice() {}

    @Advice.OnMethodEnter(suppress = Throwable.class)
    public static void enter(@Advice.Argument(0) okhttp3.OkHttpClient.Builder builder) {
      if (!builder
          .interceptors()
          .contains(io.github.errorownership.javaagent.okhttp.RetryingInterceptor.INSTANCE)) {
        builder
            .interceptors()
            .add(io.github.errorownership.javaagent.okhttp.RetryingInterceptor.INSTANCE);
      }
    }
  }

  /**
   * The channel builder the agent's grpc-1.6 instrumentation adds its client interceptor to, at the
   * entry of build(): the hooks' retry loop goes right outside it.
   */
  public static final class GrpcChannelBuilderInstrumentation implements TypeInstrumentation {
    @Override
    public ElementMatcher<TypeDescription> typeMatcher() {
      return AgentElementMatchers.extendsClass(named("io.grpc.ManagedChannelBuilder"))
          .and(declaresField(named("interceptors")));
    }

    @Override
    public void transform(TypeTransformer transformer) {
      transformer.applyAdviceToMethod(
          isMethod().and(named("build")).and(takesArguments(0)),
          ErrorOwnershipInstrumentationModule.class.getName() + "$GrpcChannelAdvice");
    }
  }

  /** Adds the retry loop once per builder. */
  @SuppressWarnings("unused")
  public static final class GrpcChannelAdvice {
    private GrpcChannelAdvice() {}

    @Advice.OnMethodEnter(suppress = Throwable.class)
    public static void enter(
        @Advice.FieldValue("interceptors") java.util.List<io.grpc.ClientInterceptor> interceptors) {
      io.github.errorownership.javaagent.grpc.GrpcHooks.addClient(interceptors);
    }
  }

  /**
   * The server builder that holds the interceptors (ServerImplBuilder, the delegate of Netty's and
   * the others'): the hooks' claims go right inside the agent's server interceptor.
   */
  public static final class GrpcServerBuilderInstrumentation implements TypeInstrumentation {
    @Override
    public ElementMatcher<TypeDescription> typeMatcher() {
      return AgentElementMatchers.extendsClass(named("io.grpc.ServerBuilder"))
          .and(declaresField(named("interceptors")));
    }

    @Override
    public void transform(TypeTransformer transformer) {
      transformer.applyAdviceToMethod(
          isMethod().and(isPublic()).and(named("build")).and(takesArguments(0)),
          ErrorOwnershipInstrumentationModule.class.getName() + "$GrpcServerAdvice");
    }
  }

  /** Adds the claims once per builder. */
  @SuppressWarnings("unused")
  public static final class GrpcServerAdvice {
    private GrpcServerAdvice() {}

    @Advice.OnMethodEnter(suppress = Throwable.class)
    public static void enter(
        @Advice.FieldValue("interceptors") java.util.List<io.grpc.ServerInterceptor> interceptors) {
      io.github.errorownership.javaagent.grpc.GrpcHooks.addServer(interceptors);
    }
  }
}
