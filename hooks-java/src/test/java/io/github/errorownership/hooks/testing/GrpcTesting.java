// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks.testing;

import io.grpc.ClientInterceptor;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.Server;
import io.grpc.ServerInterceptor;
import io.grpc.ServerInterceptors;
import io.grpc.ServerServiceDefinition;
import io.grpc.Status;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ServerCalls;
import io.grpc.stub.StreamObserver;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * A unary string method and real gRPC servers on 127.0.0.1 (also the agent extension's tests',
 * without the library's other test classes).
 */
public final class GrpcTesting {
  private GrpcTesting() {}

  public static final MethodDescriptor.Marshaller<String> STRING =
      new MethodDescriptor.Marshaller<>() {
        @Override
        public InputStream stream(String value) {
          return new ByteArrayInputStream(value.getBytes(StandardCharsets.UTF_8));
        }

        @Override
        public String parse(InputStream stream) {
          try {
            return new String(stream.readAllBytes(), StandardCharsets.UTF_8);
          } catch (IOException e) {
            throw new UncheckedIOException(e);
          }
        }
      };

  public static final MethodDescriptor<String, String> SAY =
      MethodDescriptor.<String, String>newBuilder(STRING, STRING)
          .setType(MethodDescriptor.MethodType.UNARY)
          .setFullMethodName("test.Echo/Say")
          .build();

  public static final Metadata.Key<String> PREVIOUS =
      Metadata.Key.of("grpc-previous-rpc-attempts", Metadata.ASCII_STRING_MARSHALLER);
  public static final Metadata.Key<String> CLAIM =
      Metadata.Key.of("error-claim", Metadata.ASCII_STRING_MARSHALLER);
  public static final Metadata.Key<String> PUSHBACK =
      Metadata.Key.of("grpc-retry-pushback-ms", Metadata.ASCII_STRING_MARSHALLER);

  /** A handler of one unary call. */
  public interface Handler {
    void handle(String request, Metadata headers, StreamObserver<String> out) throws Exception;
  }

  /** A server on 127.0.0.1 serving SAY with handler, inside interceptors (last outermost). */
  public static Server serve(Handler handler, ServerInterceptor... interceptors)
      throws IOException {
    HeaderCapture capture = new HeaderCapture();
    ServerServiceDefinition def =
        ServerServiceDefinition.builder("test.Echo")
            .addMethod(
                SAY,
                ServerCalls.asyncUnaryCall(
                    (req, out) -> {
                      try {
                        handler.handle(req, HeaderCapture.CURRENT.get(), out);
                      } catch (Exception e) {
                        out.onError(
                            Status.INTERNAL.withDescription(e.toString()).asRuntimeException());
                      }
                    }))
            .build();
    List<ServerInterceptor> all = new ArrayList<>(List.of(interceptors));
    all.add(0, capture);
    return NettyServerBuilder.forAddress(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0))
        .addService(ServerInterceptors.intercept(def, all))
        .build()
        .start();
  }

  public static ManagedChannel channel(Server server, ClientInterceptor... interceptors) {
    return channel(server.getPort(), interceptors);
  }

  /** A plaintext channel to 127.0.0.1:{@code port}. */
  public static ManagedChannel channel(int port, ClientInterceptor... interceptors) {
    return NettyChannelBuilder.forAddress("127.0.0.1", port)
        .usePlaintext()
        .intercept(interceptors)
        .build();
  }

  public static void shutdown(Server s, ManagedChannel... channels) throws InterruptedException {
    for (ManagedChannel c : channels) {
      c.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
    }
    if (s != null) {
      s.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
    }
  }

  /** A callee answering each attempt with the next of responses (code, claim). */
  public static final class Scripted implements Handler {
    private final List<Object> responses;
    public final List<String> previous = new ArrayList<>();

    public Scripted(List<Object> responses) {
      this.responses = responses;
    }

    @Override
    public void handle(String request, Metadata headers, StreamObserver<String> out) {
      Object r;
      synchronized (this) {
        int n = previous.size();
        previous.add(headers.get(PREVIOUS));
        r = responses.get(Math.min(n, responses.size() - 1));
      }
      Status.Code code = Status.Code.valueOf((String) ((Map<?, ?>) r).get("code"));
      if (code == Status.Code.OK) {
        out.onNext("ok");
        out.onCompleted();
        return;
      }
      Metadata trailers = new Metadata();
      String claim = (String) ((Map<?, ?>) r).get("claim");
      if (claim != null) {
        trailers.put(CLAIM, claim);
      }
      out.onError(Status.fromCode(code).withDescription("scripted").asRuntimeException(trailers));
    }

    public synchronized List<String> previous() {
      return new ArrayList<>(previous);
    }
  }

  /** Makes each call's request headers available to the handler. */
  static final class HeaderCapture implements ServerInterceptor {
    static final io.grpc.Context.Key<Metadata> KEY = io.grpc.Context.key("headers");
    static final ThreadLocalHeaders CURRENT = new ThreadLocalHeaders();

    @Override
    public <ReqT, RespT> io.grpc.ServerCall.Listener<ReqT> interceptCall(
        io.grpc.ServerCall<ReqT, RespT> call,
        Metadata headers,
        io.grpc.ServerCallHandler<ReqT, RespT> next) {
      io.grpc.ServerCall.Listener<ReqT> l = next.startCall(call, headers);
      return new io.grpc.ForwardingServerCallListener.SimpleForwardingServerCallListener<ReqT>(l) {
        @Override
        public void onHalfClose() {
          CURRENT.set(headers);
          try {
            super.onHalfClose();
          } finally {
            CURRENT.remove();
          }
        }
      };
    }
  }

  static final class ThreadLocalHeaders extends ThreadLocal<Metadata> {}
}
