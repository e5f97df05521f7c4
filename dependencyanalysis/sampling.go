// SPDX-License-Identifier: Apache-2.0

package dependencyanalysis

import (
	"math"
	"strconv"
	"strings"
	"sync"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// SamplingMethod says whether a figure is an estimate of all traffic or a
// count of the traces seen, as the span-metrics connector's sampling.method
// dimension does (docs/design.md §8.1).
type SamplingMethod uint8

const (
	// SamplingCounted means the trace said nothing of how it was sampled, so it
	// counts as one. Behind a sampler that does not say (a tail sampler,
	// an SDK ratio sampler of the old kind) that undercounts, and ratios
	// are biased towards what the sampler keeps.
	SamplingCounted SamplingMethod = iota
	// SamplingExtrapolated means the trace counts as its adjusted count, from
	// OpenTelemetry's probability sampling threshold (tracestate ot=th) or
	// the configured sample-rate attribute.
	SamplingExtrapolated
)

// String returns "counted" or "extrapolated".
func (m SamplingMethod) String() string {
	if m == SamplingExtrapolated {
		return "extrapolated"
	}
	return "counted"
}

// SamplingClass names how a span or a trace was sampled: no sampling
// information, a threshold, a "1 in N" rate, or a threshold its randomness
// contradicts. It is an index into a process-wide table, so that a record
// carries it in two bytes and a buffered trace in the padding of its entry.
type SamplingClass uint16

const (
	// SamplingNone means no sampling information; the trace counts as one.
	SamplingNone SamplingClass = 0
	// SamplingInconsistent means a span's threshold is not satisfied by its
	// randomness (the specification's rule: R ≥ T for every kept span), or
	// the table of classes is full; the trace's weight is unknown, and it is
	// set apart, not judged.
	SamplingInconsistent SamplingClass = 1
)

// maxThreshold is 2^56, the range of thresholds and randomness values.
const maxThreshold = uint64(1) << 56

// samplingKey is a class's value: a threshold T, or a rate N ("1 in N").
type samplingKey struct {
	threshold uint64 // T, valid when hasThreshold
	rate      float64
	hasThreshold,
	inconsistent bool
}

// weight is the adjusted count: 2^56 / (2^56 − T) for a threshold, N for a
// rate, 1 without either.
func (k samplingKey) weight() float64 {
	switch {
	case k.hasThreshold:
		return float64(maxThreshold) / float64(maxThreshold-k.threshold)
	case k.rate > 0:
		return k.rate
	}
	return 1
}

// samplingTable interns classes. Distinct classes are as many as the
// fleet's distinct sampling settings; the table is bounded all the same, and
// a class past it is SamplingInconsistent, counted as such.
var samplingTable = struct {
	mu      sync.RWMutex
	ids     map[samplingKey]SamplingClass
	keys    []samplingKey
	weights []float64
}{
	ids:     map[samplingKey]SamplingClass{{}: SamplingNone, {inconsistent: true}: SamplingInconsistent},
	keys:    []samplingKey{{}, {inconsistent: true}},
	weights: []float64{1, 0},
}

func internSampling(k samplingKey) SamplingClass {
	t := &samplingTable
	t.mu.RLock()
	c, ok := t.ids[k]
	t.mu.RUnlock()
	if ok {
		return c
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.ids[k]; ok {
		return c
	}
	if len(t.keys) > math.MaxUint16 {
		return SamplingInconsistent
	}
	c = SamplingClass(len(t.keys))
	t.ids[k] = c
	t.keys = append(t.keys, k)
	t.weights = append(t.weights, k.weight())
	return c
}

func (c SamplingClass) key() samplingKey {
	t := &samplingTable
	t.mu.RLock()
	defer t.mu.RUnlock()
	if int(c) < len(t.keys) {
		return t.keys[c]
	}
	return samplingKey{inconsistent: true}
}

// Weight returns the class's adjusted count: how many traces of all traffic
// one trace of the class stands for. It is 1 for SamplingNone and 0 for
// SamplingInconsistent, whose weight is unknown.
func (c SamplingClass) Weight() float64 {
	if c == SamplingNone {
		return 1
	}
	t := &samplingTable
	t.mu.RLock()
	defer t.mu.RUnlock()
	if int(c) < len(t.weights) {
		return t.weights[c]
	}
	return 0
}

// Method reports whether figures of the class are counted or extrapolated.
func (c SamplingClass) Method() SamplingMethod {
	if c == SamplingNone || c == SamplingInconsistent {
		return SamplingCounted
	}
	return SamplingExtrapolated
}

// Threshold returns the class's sampling threshold as tracestate's th
// spells it, "" when it has none.
func (c SamplingClass) Threshold() string {
	k := c.key()
	if !k.hasThreshold {
		return ""
	}
	s := strconv.FormatUint(k.threshold|maxThreshold, 16)[1:] // 14 digits
	if s = strings.TrimRight(s, "0"); s == "" {
		return "0"
	}
	return s
}

// CombineSampling returns the class of a figure resting on spans of classes
// a and b: the strictest. A contradicted threshold makes the whole figure's
// weight unknown; a threshold is stricter than a rate attribute, which is
// read only where no span has one; of two thresholds the higher, of two
// rates the larger.
func CombineSampling(a, b SamplingClass) SamplingClass {
	if a == b || b == SamplingNone {
		return a
	}
	if a == SamplingNone {
		return b
	}
	if a == SamplingInconsistent || b == SamplingInconsistent {
		return SamplingInconsistent
	}
	ka, kb := a.key(), b.key()
	switch {
	case ka.hasThreshold && kb.hasThreshold:
		if kb.threshold > ka.threshold {
			return b
		}
		return a
	case ka.hasThreshold:
		return a
	case kb.hasThreshold:
		return b
	case kb.rate > ka.rate:
		return b
	}
	return a
}

// samplingOf reads a span's sampling class from its W3C tracestate (the
// OpenTelemetry member, ot=th:…;rv:…) and, where that has no threshold, from
// rate, the value of the configured sample-rate attribute (0 if none).
// Randomness is rv where present, else the trace ID's last 56 bits, as the
// specification says; a threshold above it contradicts the span's being
// kept, and the class is SamplingInconsistent. A malformed th or rv is read
// as absent, as the specification's samplers do.
func samplingOf(traceState string, id pcommon.TraceID, rate float64) samplingKey {
	th, rv, ok := otValues(traceState)
	var k samplingKey
	if ok {
		if t, valid := parseThreshold(th); valid {
			k.threshold, k.hasThreshold = t, true
		}
	}
	if !k.hasThreshold {
		if rate >= 1 && !math.IsInf(rate, 0) {
			k.rate = rate
		}
		return k
	}
	r, valid := parseRandomness(rv)
	if !valid {
		r = uint64(id[9])<<48 | uint64(id[10])<<40 | uint64(id[11])<<32 |
			uint64(id[12])<<24 | uint64(id[13])<<16 | uint64(id[14])<<8 | uint64(id[15])
	}
	if r < k.threshold {
		return samplingKey{inconsistent: true}
	}
	return k
}

// SamplingOf returns the sampling class of a span of trace id with W3C
// tracestate traceState and sample-rate attribute rate (0: none), as the
// Extractor reads them.
func SamplingOf(traceState string, id pcommon.TraceID, rate float64) SamplingClass {
	k := samplingOf(traceState, id, rate)
	if k.inconsistent {
		return SamplingInconsistent
	}
	return internSampling(k)
}

// otValues finds the th and rv values of the ot member of a tracestate.
func otValues(ts string) (th, rv string, ok bool) {
	for ts != "" {
		var member string
		member, ts, _ = strings.Cut(ts, ",")
		member = strings.TrimSpace(member)
		v, found := strings.CutPrefix(member, "ot=")
		if !found {
			continue
		}
		for v != "" {
			var kv string
			kv, v, _ = strings.Cut(v, ";")
			switch {
			case strings.HasPrefix(kv, "th:"):
				th, ok = kv[3:], true
			case strings.HasPrefix(kv, "rv:"):
				rv = kv[3:]
			}
		}
		return th, rv, ok
	}
	return "", "", false
}

// parseThreshold reads th: 1 to 14 hex digits, trailing zeros left out.
func parseThreshold(s string) (uint64, bool) {
	if len(s) == 0 || len(s) > 14 {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 16, 64)
	if err != nil {
		return 0, false
	}
	return n << (4 * (14 - len(s))), true
}

// parseRandomness reads rv: exactly 14 hex digits.
func parseRandomness(s string) (uint64, bool) {
	if len(s) != 14 {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 16, 64)
	return n, err == nil
}
