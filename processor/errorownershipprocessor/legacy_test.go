// SPDX-License-Identifier: Apache-2.0

package errorownershipprocessor

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/errorownership/errorownership/ownership"
	"github.com/errorownership/errorownership/processor/errorownershipprocessor/internal/metadatatest"
)

// TestLegacyAttributesCounted: spans that carry an ownership attribute
// under its name before v0.1.0 are counted in spans_legacy_attributes, so
// that an operator sees which services still send the old names; spans
// with the current names are not.
func TestLegacyAttributesCounted(t *testing.T) {
	tests := []struct {
		name  string
		attrs []map[string]any // one span each
		want  int64
	}{
		{"current names", []map[string]any{
			{ownership.AttrClaimReceived: "unclaimed", ownership.AttrRetryDecision: "suppressed_unclaimed"},
			{ownership.AttrClaim: "claimed"},
		}, 0},
		{"legacy names", []map[string]any{
			{"error.claim.received": "unclaimed", "retry.decision": "suppressed_unclaimed", "retry.attempt": 1},
			{"error.claim": "claimed"},
			{"http.response.status_code": 200},
		}, 2},
		{"both on one span", []map[string]any{
			{ownership.AttrClaimReceived: "claimed", "error.claim.received": "unclaimed"},
		}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tt := componenttest.NewTelemetry()
			t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
			proc, _ := newTestProcessor(t, tt, testConfig(nil), consumertest.NewNop())
			ctx := context.Background()
			require.NoError(t, proc.Start(ctx, componenttest.NewNopHost()))
			td := ptrace.NewTraces()
			rs := td.ResourceSpans().AppendEmpty()
			rs.Resource().Attributes().PutStr("service.name", "checkout")
			spans := rs.ScopeSpans().AppendEmpty().Spans()
			for i, attrs := range tc.attrs {
				sp := spans.AppendEmpty()
				sp.SetTraceID(pcommon.TraceID{15: 1})
				sp.SetSpanID(pcommon.SpanID{7: byte(i + 1)})
				sp.SetKind(ptrace.SpanKindClient)
				require.NoError(t, sp.Attributes().FromRaw(attrs))
			}
			require.NoError(t, proc.ConsumeTraces(ctx, td))
			require.NoError(t, proc.Shutdown(ctx))
			if tc.want == 0 {
				assert.Zero(t, counter(t, tt, "spans_legacy_attributes"))
				return
			}
			metadatatest.AssertEqualProcessorErrorownershipSpansLegacyAttributes(t, tt,
				[]metricdata.DataPoint[int64]{{Value: tc.want}}, metricdatatest.IgnoreTimestamp())
		})
	}
}
