// SPDX-License-Identifier: Apache-2.0

package scaleout

import (
	"github.com/errorownership/errorownership/internal/testsupport/collectorproc"
)

// Telemetry is what a collector's own telemetry says: the processor's
// counts, and the Kafka receiver's partitions.
type Telemetry struct {
	// Spans read and passed on, and traces analysed.
	Spans, Traces float64
	// Verdicts by kind.
	Own, Propagated, Coincidental float64
	// Late spans (their trace had been analysed), traces taken early,
	// spans left out of the analysis, spans whose parent was not in their
	// trace.
	Late, Evicted, Dropped, Orphans float64
	// Partitions is how many partitions the Kafka receiver consumes now;
	// Records how many records it consumed.
	Partitions, Records float64
}

// Minus returns t less before: what happened in between. Partitions is t's.
func (t Telemetry) Minus(before Telemetry) Telemetry {
	return Telemetry{
		Spans: t.Spans - before.Spans, Traces: t.Traces - before.Traces,
		Own: t.Own - before.Own, Propagated: t.Propagated - before.Propagated, Coincidental: t.Coincidental - before.Coincidental,
		Late: t.Late - before.Late, Evicted: t.Evicted - before.Evicted, Dropped: t.Dropped - before.Dropped,
		Orphans: t.Orphans - before.Orphans, Partitions: t.Partitions, Records: t.Records - before.Records,
	}
}

// Plus returns the sum of t and o.
func (t Telemetry) Plus(o Telemetry) Telemetry {
	return Telemetry{
		Spans: t.Spans + o.Spans, Traces: t.Traces + o.Traces,
		Own: t.Own + o.Own, Propagated: t.Propagated + o.Propagated, Coincidental: t.Coincidental + o.Coincidental,
		Late: t.Late + o.Late, Evicted: t.Evicted + o.Evicted, Dropped: t.Dropped + o.Dropped,
		Orphans: t.Orphans + o.Orphans, Partitions: t.Partitions + o.Partitions, Records: t.Records + o.Records,
	}
}

// readTelemetry reads p's telemetry.
func readTelemetry(p *collectorproc.Process) (Telemetry, error) {
	const proc = "otelcol_processor_errorownership_"
	var t Telemetry
	for _, m := range []struct {
		v      *float64
		name   string
		labels []string
	}{
		{&t.Spans, proc + "spans_seen", nil},
		{&t.Traces, proc + "traces_analyzed", nil},
		{&t.Own, proc + "verdicts", []string{`verdict="own"`}},
		{&t.Propagated, proc + "verdicts", []string{`verdict="propagated"`}},
		{&t.Coincidental, proc + "verdicts", []string{`verdict="coincidental"`}},
		{&t.Late, proc + "spans_late", nil},
		{&t.Evicted, proc + "traces_evicted", nil},
		{&t.Dropped, proc + "spans_dropped", nil},
		{&t.Orphans, proc + "spans_unlinked", []string{`reason="orphan"`}},
		{&t.Records, "otelcol_kafka_receiver_records", []string{`outcome="success"`}},
	} {
		v, err := p.Metric(m.name, m.labels...)
		if err != nil {
			return t, err
		}
		*m.v = v
	}
	started, err := p.Metric("otelcol_kafka_receiver_partition_start")
	if err != nil {
		return t, err
	}
	closed, err := p.Metric("otelcol_kafka_receiver_partition_close")
	t.Partitions = started - closed
	return t, err
}
