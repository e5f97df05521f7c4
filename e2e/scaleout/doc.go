// SPDX-License-Identifier: Apache-2.0

// Package scaleout runs, on one machine and fed the same spans, the three
// deployments docs/design.md §8 compares, each with the built collector
// configured as the README shows and writing to its own PostgreSQL
// database:
//
//   - one gateway collector, which sees every span of every trace;
//   - two collectors behind a plain load balancer, each given every other
//     export request, so that each sees part of every trace;
//   - the scale-out on Kafka: a front-tier collector producing to a topic
//     partitioned by trace ID (an in-process broker, kfake, speaking the
//     Kafka wire protocol) and errorownership collectors consuming it in
//     one consumer group, of which one is stopped and another joins while
//     traffic flows.
//
// It reads back what each deployment's store holds, and what its
// collectors' telemetry says, so that the end-to-end test can require the
// Kafka deployment's figures to equal the gateway's, and `make scale-demo`
// can print them side by side with the load balancer's drift and what a
// rebalance costs.
package scaleout
