// SPDX-License-Identifier: Apache-2.0

// Test only, preloaded after the registers: counts, per span, how many times
// each attribute is set after the span started, and writes the counts on the
// span as it ends (test.errorownership.sets), because the SDK keeps only the
// last of several values and an overwrite is otherwise invisible. Every
// tracer of the SDK shares the Tracer prototype patched here.
'use strict';

const { trace } = require('@opentelemetry/api');

const KEY = 'test.errorownership.sets';
const tracer = trace.getTracer('errorownership-count-sets');
// The API's proxy hands out the SDK's tracer through _getTracer.
const proto = Object.getPrototypeOf(typeof tracer._getTracer === 'function' ? tracer._getTracer() : tracer);
const startSpan = proto.startSpan;
if (typeof startSpan !== 'function')
  throw new Error('count-sets: no SDK tracer registered; preload it after the register');
proto.startSpan = function (...args) {
  const span = startSpan.apply(this, args);
  const counts = {};
  let inMany = false;
  const one = span.setAttribute.bind(span);
  const many = span.setAttributes.bind(span);
  const end = span.end.bind(span);
  span.setAttribute = (k, v) => {
    if (!inMany) counts[k] = (counts[k] ?? 0) + 1;
    return one(k, v);
  };
  span.setAttributes = attrs => {
    for (const k of Object.keys(attrs ?? {})) counts[k] = (counts[k] ?? 0) + 1;
    inMany = true;
    try {
      return many(attrs);
    } finally {
      inMany = false;
    }
  };
  span.end = t => {
    one(KEY, JSON.stringify(counts));
    return end(t);
  };
  return span;
};
