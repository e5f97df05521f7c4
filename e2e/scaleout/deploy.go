// SPDX-License-Identifier: Apache-2.0

package scaleout

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/errorownership/errorownership/internal/portlock"
	"github.com/errorownership/errorownership/internal/testsupport/collectorproc"
)

// The shipped configurations each collector starts from, in the directory
// Options.Configs names: the README's, and `make run`'s.
const (
	gatewayConfig  = "otelcol-config.yaml"
	frontConfig    = "otelcol-kafka-front.yaml"
	analysisConfig = "otelcol-kafka-analysis.yaml"
)

// Timings is what the collectors' errorownership sections get besides the
// shipped configuration: the timings of a run that lasts a minute rather
// than days.
type Timings struct {
	// DecisionWait must cover how far apart a trace's spans arrive: the
	// SDKs' batching (200ms here), the front tier's batch processor and the
	// Kafka consumer's fetch wait.
	DecisionWait time.Duration
}

// processorSection is the errorownership section every analysing collector
// gets on top of its shipped configuration, indented by four spaces.
//
// A verdict resting on an edge the run never teaches a mode is held 5s,
// not 10m: each phase ends once no collector holds one.
func processorSection(t Timings) string {
	return fmt.Sprintf(`    decision_wait: %v
    flush_interval: 1s
    rejudge:
      max_age: 5s
    store: errorownership_store
    hints_extension: errorownership_hints`, t.DecisionWait)
}

// storeSection is the errorownership_store extension every analysing
// collector writes to dsn through, indented by two spaces under extensions:
// its edge_model judges the verdicts and the hints alike.
//
// half_life is 0 because decay weighs a bucket by when it was written, which
// differs between two deployments fed the same spans; without decay the
// edge model's counts are whole numbers that compare exactly. The audit is
// unbounded because its bound applies per replica: a fleet of n replicas
// keeps up to n times as many entries as one gateway.
func storeSection(dsn string) string {
	return fmt.Sprintf(`  errorownership_store:
    dsn: '%s'
    bucket: 1s
    model_refresh: 1s
    audit_per_service_per_minute: 0
    edge_model:
      half_life: 0s`, strings.ReplaceAll(dsn, "'", "''"))
}

// hintsSection is the errorownership_hints extension of an analysing
// collector, indented by two spaces under extensions.
func hintsSection(hintsAddr string) string {
	return fmt.Sprintf(`  errorownership_hints:
    endpoint: %s
    ttl: 2s`, hintsAddr)
}

// TelemetrySection is the service::telemetry section that serves a
// collector's own metrics, at the detailed level, on 127.0.0.1:metricsPort.
func TelemetrySection(metricsPort int) string {
	return fmt.Sprintf(`  telemetry:
    metrics:
      level: detailed
      readers:
        - pull:
            exporter:
              prometheus:
                host: 127.0.0.1
                port: %d`, metricsPort)
}

// Collector is one collector of a deployment.
type Collector struct {
	*collectorproc.Process
	// OTLPAddr receives OTLP/HTTP (gateway, load-balanced and front-tier
	// collectors); HintsAddr serves the hints (the analysing ones).
	OTLPAddr, HintsAddr string
	// Exported is the file the collector exports spans to (the Kafka
	// analysis tier): the spans it consumed, in the file exporter's proto
	// format.
	Exported string
}

// ports are a collector's free loopback ports.
type ports struct {
	health, grpc, http, hints string
	metrics                   int
}

// freePorts reserves a collector's ports (internal/portlock). They stay
// reserved until the process exits, after the collectors it started:
// another process's collector never gets one, even once this one stopped.
func freePorts() (ports, error) {
	var p ports
	for _, a := range []*string{&p.health, &p.grpc, &p.http, &p.hints} {
		r, err := portlock.Reserve()
		if err != nil {
			return p, err
		}
		*a = r.Addr()
	}
	r, err := portlock.Reserve()
	if err != nil {
		return p, err
	}
	p.metrics = r.Number()
	return p, nil
}

// launcher starts collectors from the shipped configurations.
type launcher struct {
	bin, configs, dir string
	timings           Timings
}

// start writes override (YAML merged over the shipped file base) and starts
// the collector.
func (l *launcher) start(ctx context.Context, name, base, override string, p ports) (*collectorproc.Process, error) {
	path := filepath.Join(l.dir, name+".yaml")
	if err := os.WriteFile(path, []byte(override), 0o644); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return collectorproc.Start(ctx, l.bin, collectorproc.Options{
		Name:        name,
		Configs:     []string{filepath.Join(l.configs, base), path},
		HealthAddr:  p.health,
		MetricsAddr: fmt.Sprintf("127.0.0.1:%d", p.metrics),
	})
}

// gateway starts a collector with `make run`'s configuration, receiving
// OTLP itself and writing to dsn: the one gateway, or one collector behind
// a load balancer.
func (l *launcher) gateway(ctx context.Context, name, dsn string) (*Collector, error) {
	p, err := freePorts()
	if err != nil {
		return nil, err
	}
	override := otlpIn(p, storeSection(dsn), hintsSection(p.hints)) + fmt.Sprintf(`processors:
  errorownership:
%s
service:
  extensions: [health_check, errorownership_store, errorownership_hints]
%s
`, processorSection(l.timings), TelemetrySection(p.metrics))
	proc, err := l.start(ctx, name, gatewayConfig, override, p)
	if err != nil {
		return nil, err
	}
	return &Collector{Process: proc, OTLPAddr: p.http, HintsAddr: p.hints}, nil
}

// otlpIn is the configuration of a collector that receives OTLP on p's
// ports and answers health checks, with the extensions' configuration
// (indented by two spaces) given.
func otlpIn(p ports, extensions ...string) string {
	return fmt.Sprintf(`extensions:
  health_check:
    endpoint: %s
%s
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
      http:
        endpoint: %s
`, p.health, strings.Join(extensions, "\n"), p.grpc, p.http)
}

// front starts the first tier of the Kafka deployment: OTLP in, Kafka out,
// partitioned by trace ID.
func (l *launcher) front(ctx context.Context, name, broker string) (*Collector, error) {
	p, err := freePorts()
	if err != nil {
		return nil, err
	}
	override := otlpIn(p) + fmt.Sprintf(`exporters:
  kafka:
    brokers: [%s]
service:
  extensions: [health_check]
%s
`, broker, TelemetrySection(p.metrics))
	proc, err := l.start(ctx, name, frontConfig, override, p)
	if err != nil {
		return nil, err
	}
	return &Collector{Process: proc, OTLPAddr: p.http}, nil
}

// analysis starts an errorownership collector of the Kafka deployment's
// second tier. The trace backend it exports to is a file: the spans it
// consumed, so that a run can tell which replica got which span.
func (l *launcher) analysis(ctx context.Context, name, broker, dsn string) (*Collector, error) {
	p, err := freePorts()
	if err != nil {
		return nil, err
	}
	exported := filepath.Join(l.dir, name+".spans")
	override := fmt.Sprintf(`extensions:
  health_check:
    endpoint: %s
%s
%s
receivers:
  kafka:
    brokers: [%s]
processors:
  errorownership:
%s
exporters:
  file:
    path: %s
    format: proto
service:
%s
  pipelines:
    traces:
      exporters: [file]
`, p.health, storeSection(dsn), hintsSection(p.hints), broker, processorSection(l.timings), exported, TelemetrySection(p.metrics))
	proc, err := l.start(ctx, name, analysisConfig, override, p)
	if err != nil {
		return nil, err
	}
	return &Collector{Process: proc, HintsAddr: p.hints, Exported: exported}, nil
}
