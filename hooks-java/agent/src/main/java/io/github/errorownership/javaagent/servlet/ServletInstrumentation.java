// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.javaagent.servlet;

import static net.bytebuddy.matcher.ElementMatchers.isPublic;
import static net.bytebuddy.matcher.ElementMatchers.named;
import static net.bytebuddy.matcher.ElementMatchers.takesArgument;
import static net.bytebuddy.matcher.ElementMatchers.takesArguments;

import io.opentelemetry.javaagent.extension.instrumentation.TypeInstrumentation;
import io.opentelemetry.javaagent.extension.instrumentation.TypeTransformer;
import io.opentelemetry.javaagent.extension.matcher.AgentElementMatchers;
import net.bytebuddy.asm.Advice;
import net.bytebuddy.description.type.TypeDescription;
import net.bytebuddy.matcher.ElementMatcher;

/**
 * The first Servlet.service or Filter.doFilter of a request (Jakarta). The build relocates this
 * package, with the library's ClaimingResponse, from jakarta.servlet to javax.servlet
 * (io.github.errorownership.javaagent.javax.servlet): the javax twin is this code, not a copy.
 */
public final class ServletInstrumentation implements TypeInstrumentation {
  @Override
  public ElementMatcher<TypeDescription> typeMatcher() {
    return AgentElementMatchers.implementsInterface(
        named("jakarta.servlet.Servlet").or(named("jakarta.servlet.Filter")));
  }

  @Override
  public void transform(TypeTransformer transformer) {
    transformer.applyAdviceToMethod(
        named("service")
            .and(takesArguments(2))
            .and(takesArgument(0, named("jakarta.servlet.ServletRequest")))
            .and(takesArgument(1, named("jakarta.servlet.ServletResponse")))
            .and(isPublic()),
        ServletInstrumentation.class.getName() + "$ServletAdvice");
    transformer.applyAdviceToMethod(
        named("doFilter")
            .and(takesArguments(3))
            .and(takesArgument(0, named("jakarta.servlet.ServletRequest")))
            .and(takesArgument(1, named("jakarta.servlet.ServletResponse")))
            .and(isPublic()),
        ServletInstrumentation.class.getName() + "$ServletAdvice");
  }

  /** Wraps the response; the request's ledger is current until the method returns. */
  @SuppressWarnings("unused")
  public static final class ServletAdvice {
    private ServletAdvice() {}

    @Advice.OnMethodEnter(suppress = Throwable.class)
    public static AgentResponse enter(
        @Advice.Argument(0) jakarta.servlet.ServletRequest request,
        @Advice.Argument(value = 1, readOnly = false) jakarta.servlet.ServletResponse response) {
      AgentResponse w = AgentResponse.enter(request, response);
      if (w != null) {
        response = w;
      }
      return w;
    }

    @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
    public static void exit(@Advice.Enter AgentResponse w) {
      if (w != null) {
        w.exit();
      }
    }
  }
}
