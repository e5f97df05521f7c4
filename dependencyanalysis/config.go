// SPDX-License-Identifier: Apache-2.0

package dependencyanalysis

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"time"

	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/errorownership/errorownership/internal/configcheck"
	"github.com/errorownership/errorownership/ownership"
)

// Config configures the engine. The processor embeds it, so its field tags
// are the collector configuration keys.
type Config struct {
	// Classification decides which spans are errors.
	Classification Classification `mapstructure:"classification"`
	// EdgeModel decides when an edge is fail-close or fail-open.
	EdgeModel ModelConfig `mapstructure:"edge_model"`
	// Attributes overrides where names and attempt numbers are read from.
	Attributes AttributeNames `mapstructure:"attributes"`
}

// Classification decides which spans are errors (docs/design.md §4.1).
type Classification struct {
	// HTTPClientErrors makes HTTP 4xx responses errors. By default they are
	// the caller's fault and are not.
	HTTPClientErrors bool `mapstructure:"http_4xx_is_error"`
	// GRPCErrorCodes are the gRPC status codes, by name, that are server
	// faults. Default: UNKNOWN, DEADLINE_EXCEEDED, UNIMPLEMENTED, INTERNAL,
	// UNAVAILABLE, DATA_LOSS (OpenTelemetry's server-span rule).
	GRPCErrorCodes []string `mapstructure:"grpc_error_codes"`
	// TimeoutErrorTypes are error.type values, compared case-insensitively,
	// that mark a timeout besides HTTP 408/504, gRPC DEADLINE_EXCEEDED and
	// any error.type containing "timeout" or "deadline".
	TimeoutErrorTypes []string `mapstructure:"timeout_error_types"`
}

// ModelConfig tunes the edge model.
type ModelConfig struct {
	// MinSamples is how many failed calls an edge needs before it gets a mode.
	MinSamples int `mapstructure:"min_samples"`
	// Confidence is the Wilson interval's confidence, in (0.5, 1).
	Confidence float64 `mapstructure:"confidence"`
	// FailCloseThreshold: an edge is fail-close when the lower confidence
	// bound of P(inbound fails | call failed) is at least this.
	FailCloseThreshold float64 `mapstructure:"fail_close_threshold"`
	// FailOpenThreshold: an edge is fail-open when the upper confidence
	// bound of P(inbound fails | call failed) is at most this.
	FailOpenThreshold float64 `mapstructure:"fail_open_threshold"`
	// HalfLife is how fast old observations fade, so the model follows a
	// change in behaviour. Zero keeps every observation at full weight.
	HalfLife time.Duration `mapstructure:"half_life"`
	// MaxEdges bounds the distinct edges the model tracks (default
	// DefaultMaxEdges); past it the least recently seen are forgotten.
	MaxEdges int `mapstructure:"max_edges"`
}

// AttributeNames lists span attributes to read, in priority order. Empty
// lists keep the defaults.
type AttributeNames struct {
	// PeerService names the callee on an outbound span when the callee's
	// own inbound span is not in the trace. Default: service.peer.name,
	// peer.service, messaging.destination.name. Without any of them the
	// callee is named by its address (server.address and server.port).
	PeerService []string `mapstructure:"peer_service"`
	// RetryAttempt carries the attempt number (0 or absent first). Default:
	// http.request.resend_count, error_ownership.retry.attempt, and after
	// them the name before v0.1.0, retry.attempt (a configured list is read
	// as it stands).
	RetryAttempt []string `mapstructure:"retry_attempt"`
	// SampleRate carries a span's sample rate as "1 in N" (N ≥ 1), as
	// Honeycomb's SampleRate and Datadog's _sample_rate inverse do: read
	// only where the span's tracestate has no OpenTelemetry threshold
	// (ot=th). Default: none, and a trace without a threshold counts as
	// one (docs/design.md §8.1).
	SampleRate []string `mapstructure:"sample_rate"`
}

// DefaultConfig returns the engine's defaults.
func DefaultConfig() Config {
	return Config{
		Classification: Classification{
			GRPCErrorCodes: []string{"UNKNOWN", "DEADLINE_EXCEEDED", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS"},
		},
		EdgeModel: ModelConfig{
			MinSamples:         20,
			Confidence:         0.95,
			FailCloseThreshold: 0.8,
			FailOpenThreshold:  0.2,
			HalfLife:           10 * time.Minute,
			MaxEdges:           DefaultMaxEdges,
		},
		Attributes: AttributeNames{
			PeerService: []string{string(semconv.ServicePeerNameKey), "peer.service",
				string(semconv.MessagingDestinationNameKey)},
			RetryAttempt: []string{string(semconv.HTTPRequestResendCountKey), ownership.AttrRetryAttempt},
		},
	}
}

// Validate reports every problem in the configuration, each naming the key
// and what to do.
func (c *Config) Validate() error {
	var errs []error
	for _, name := range c.Classification.GRPCErrorCodes {
		if _, ok := grpcCodeByName(name); !ok {
			errs = append(errs, fmt.Errorf("classification.grpc_error_codes: %q is not a gRPC status code name; use names such as UNAVAILABLE or INTERNAL", name))
		}
	}
	errs = append(errs, c.EdgeModel.Check("edge_model"))
	if n := len(c.Attributes.PeerService); n > maxPeerServiceNames {
		errs = append(errs, fmt.Errorf("attributes.peer_service: %d names, but only the first %d are read; keep at most %d, the most specific first", n, maxPeerServiceNames, maxPeerServiceNames))
	}
	for _, list := range []struct {
		key   string
		names []string
	}{{"attributes.peer_service", c.Attributes.PeerService}, {"attributes.retry_attempt", c.Attributes.RetryAttempt}, {"attributes.sample_rate", c.Attributes.SampleRate}} {
		for _, n := range list.names {
			if strings.TrimSpace(n) == "" {
				errs = append(errs, fmt.Errorf("%s: empty attribute name; remove it or name an attribute", list.key))
			}
		}
	}
	return errors.Join(errs...)
}

// minHalfLife is the shortest edge_model.half_life but 0.
const minHalfLife = time.Second

// Check reports every problem of the edge model's keys, each named under
// key (such as "edge_model"). It is not Validate, so that the collector,
// which calls every Validate of a configuration, reports them once, through
// the Validate of the section that holds them.
func (m ModelConfig) Check(key string) error {
	var errs []error
	if m.MinSamples < 1 {
		errs = append(errs, fmt.Errorf("%s.min_samples: %d must be at least 1", key, m.MinSamples))
	}
	if !(m.Confidence > 0.5 && m.Confidence < 1) {
		errs = append(errs, fmt.Errorf("%s.confidence: %v must be between 0.5 and 1, such as 0.95", key, m.Confidence))
	}
	if !(m.FailCloseThreshold > 0 && m.FailCloseThreshold <= 1) {
		errs = append(errs, fmt.Errorf("%s.fail_close_threshold: %v must be in (0, 1]", key, m.FailCloseThreshold))
	}
	if !(m.FailOpenThreshold >= 0 && m.FailOpenThreshold < 1) {
		errs = append(errs, fmt.Errorf("%s.fail_open_threshold: %v must be in [0, 1)", key, m.FailOpenThreshold))
	}
	if m.FailOpenThreshold >= m.FailCloseThreshold {
		errs = append(errs, fmt.Errorf("%s: fail_open_threshold (%v) must be below fail_close_threshold (%v)", key, m.FailOpenThreshold, m.FailCloseThreshold))
	}
	if m.MaxEdges < 0 {
		errs = append(errs, fmt.Errorf("%s.max_edges: %d must not be negative; leave it out for %d", key, m.MaxEdges, DefaultMaxEdges))
	}
	switch hl := m.HalfLife; {
	case hl < 0:
		errs = append(errs, fmt.Errorf("%s.half_life: %v must not be negative; use 0 to keep observations forever", key, hl))
	case hl > 0 && hl < minHalfLife:
		// A positive half-life this short is a unit forgotten.
		errs = append(errs, fmt.Errorf("%s.half_life: %v must be 0 (observations never fade) or at least %v%s", key, hl, minHalfLife, cmp.Or(configcheck.BareNumber(hl, "10m"), ", such as 10m")))
	}
	return errors.Join(errs...)
}

// grpcCodes are the gRPC status code names, indexed by code.
var grpcCodes = [...]string{
	"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
	"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
	"ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
	"UNAUTHENTICATED",
}

const (
	grpcCancelled        = 1
	grpcDeadlineExceeded = 4
	grpcUnavailable      = 14
)

func grpcCodeByName(name string) (int, bool) {
	for code, n := range grpcCodes {
		if strings.EqualFold(n, name) {
			return code, true
		}
	}
	return 0, false
}
