// SPDX-License-Identifier: Apache-2.0

// test/otel.ts's SDK with @opentelemetry/instrumentation-grpc added, for the
// test files that run grpc-js under it: imported first, before @grpc/grpc-js
// is loaded, so that the instrumentation patches it. The other gRPC tests
// run without it (the client interceptor's attempt spans are children of
// the active span, which the instrumentation would make its own).
import { registerInstrumentations } from '@opentelemetry/instrumentation';
import { GrpcInstrumentation } from '@opentelemetry/instrumentation-grpc';

export * from './otel';

registerInstrumentations({ instrumentations: [new GrpcInstrumentation()] });
