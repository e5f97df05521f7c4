// SPDX-License-Identifier: Apache-2.0

import * as grpc from '@grpc/grpc-js';
import { Mode, RetryBudget } from '../src';
import { grpcClientInterceptor } from '../src/grpc';

/** Retries without waiting, for tests. */
export const fast = { backoff: { initialMs: 1, maxMs: 1 } };

const id = (b: Buffer): Buffer => b;
export const service: grpc.ServiceDefinition = {
  Call: {
    path: '/test.Svc/Call',
    requestStream: false,
    responseStream: false,
    requestSerialize: id,
    requestDeserialize: id,
    responseSerialize: id,
    responseDeserialize: id,
  },
};
export const Client = grpc.makeGenericClientConstructor(service, 'Svc');
export type Handler = grpc.handleUnaryCall<Buffer, Buffer>;

/** Serves handler on a free port, from server when given (else a new one with options). */
export async function startServer(
  handler: Handler,
  options?: grpc.ServerOptions,
  server = new grpc.Server(options)
): Promise<{ server: grpc.Server; address: string }> {
  server.addService(service, { Call: handler });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) =>
      err ? reject(err) : resolve(p)
    )
  );
  return { server, address: `127.0.0.1:${port}` };
}

export function stop(server: grpc.Server): void {
  server.forceShutdown();
}

export interface CallResult {
  code: number;
  trailers: grpc.Metadata;
}

/** One unary call; resolves with the final status code and trailers. */
export function call(client: grpc.Client, deadlineMs = 10_000): Promise<CallResult> {
  return new Promise(resolve => {
    const c = (client as unknown as { Call: (...args: unknown[]) => grpc.ClientUnaryCall }).Call(
      Buffer.from('hi'),
      new grpc.Metadata(),
      { deadline: Date.now() + deadlineMs },
      () => undefined
    );
    c.on('status', (s: grpc.StatusObject) => resolve({ code: s.code, trailers: s.metadata }));
  });
}

export function code(name: string): number {
  const c = (grpc.status as unknown as Record<string, number>)[name];
  if (c === undefined) throw new Error(`no status ${name}`);
  return c;
}

export interface GrpcScripted {
  code: string;
  claim?: string;
}

/** A callee answering each attempt with the next scripted status (the last one repeats). */
export async function scriptedCallee(
  responses: GrpcScripted[]
): Promise<{ server: grpc.Server; address: string; attempts: (string | null)[] }> {
  const attempts: (string | null)[] = [];
  const { server, address } = await startServer((c, cb) => {
    const i = attempts.length;
    const v = c.metadata.get('grpc-previous-rpc-attempts');
    attempts.push(v.length ? String(v[0]) : null);
    const r = responses[Math.min(i, responses.length - 1)];
    const md = new grpc.Metadata();
    if (r.claim !== undefined) md.set('error-claim', r.claim);
    if (r.code === 'OK') cb(null, Buffer.from('ok'), md);
    else cb({ code: code(r.code), details: 'scripted', metadata: md });
  });
  return { server, address, attempts };
}

/**
 * The dependencies of a grpc.json server case: a scripted callee for each of
 * its calls, a client to it through the hooks' client interceptor, and the
 * edge modes the case gives them, by callee address.
 */
export async function scriptedDependencies(calls: { responses: GrpcScripted[]; mode?: Mode }[]): Promise<{
  callees: Awaited<ReturnType<typeof scriptedCallee>>[];
  clients: grpc.Client[];
  modes: Map<string, Mode>;
}> {
  const callees = [];
  const clients: grpc.Client[] = [];
  const modes = new Map<string, Mode>();
  for (const c of calls) {
    const callee = await scriptedCallee(c.responses);
    callees.push(callee);
    if (c.mode) modes.set(callee.address, c.mode);
    clients.push(
      new Client(callee.address, grpc.credentials.createInsecure(), {
        interceptors: [
          grpcClientInterceptor({
            ...fast,
            target: callee.address,
            budget: new RetryBudget({ ratio: 1, min_retries_per_second: 100 }),
          }),
        ],
      })
    );
  }
  return { callees, clients, modes };
}
