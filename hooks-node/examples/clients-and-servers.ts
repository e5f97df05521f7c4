// SPDX-License-Identifier: Apache-2.0

// The README's snippets for a plain http.Server, the http.request client and
// @grpc/grpc-js, compiled (TypeScript strict, tsconfig.json) against the
// package's own types, as a service imports them.
import * as http from 'node:http';
import * as grpc from '@grpc/grpc-js';
import * as eo from '@errorownership/hooks';
import { grpcClientInterceptor, grpcServerInterceptor, wrapGrpcServer } from '@errorownership/hooks/grpc';

const hints = eo.startHints('http://otel-collector:4320', process.env.OTEL_SERVICE_NAME ?? 'checkout');

export function plainServer(): http.Server {
  // region http-server
  const server = http.createServer(
    eo.wrapRequestListener(
      (req, res) => {
        res.end('ok\n');
      },
      { hints }
    )
  );
  // endregion http-server
  return server;
}

export async function charge(): Promise<number> {
  // region http-request
  const client = eo.createHttpClient({ hints });
  const res = await client.request('http://payments:8080/charge', { method: 'PUT', body: '{"cents":100}' });
  res.resume(); // or read the body
  // endregion http-request
  return res.statusCode ?? 0;
}

export function grpcHooks(): { client: grpc.Client; server: grpc.Server } {
  const target = 'stock:50051';
  // region grpc
  const client = new grpc.Client(target, grpc.credentials.createInsecure(), {
    interceptors: [grpcClientInterceptor({ target, hints })],
  });
  // wrapGrpcServer: the claim's attributes on instrumentation-grpc's SERVER span (below)
  const server = wrapGrpcServer(new grpc.Server({ interceptors: [grpcServerInterceptor({ hints })] }));
  // endregion grpc
  return { client, server };
}
