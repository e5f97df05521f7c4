// SPDX-License-Identifier: Apache-2.0

package scenario

import "go.opentelemetry.io/collector/pdata/ptrace"

// BySource regroups td as a gateway collector receives it from the
// services' SDKs: every batch holds the spans of one service (one
// resource), at most batchSpans of them, as a batch span processor
// exports them, and the services' batches interleave in the order they
// fill. The spans of a trace so arrive in as many batches as it has
// services, each batch holding spans of many traces. td is not changed.
func BySource(td ptrace.Traces, batchSpans int) []ptrace.Traces {
	type pending struct {
		td    ptrace.Traces
		spans ptrace.SpanSlice
	}
	var out []ptrace.Traces
	open := map[string]*pending{}
	var order []string // services by first appearance, for a stable flush
	for _, rs := range td.ResourceSpans().All() {
		svc := ""
		if v, ok := rs.Resource().Attributes().Get(attrServiceName); ok {
			svc = v.Str()
		}
		for _, ss := range rs.ScopeSpans().All() {
			for _, sp := range ss.Spans().All() {
				p := open[svc]
				if p == nil {
					p = &pending{td: ptrace.NewTraces()}
					nrs := p.td.ResourceSpans().AppendEmpty()
					rs.Resource().CopyTo(nrs.Resource())
					nss := nrs.ScopeSpans().AppendEmpty()
					ss.Scope().CopyTo(nss.Scope())
					p.spans = nss.Spans()
					p.spans.EnsureCapacity(batchSpans)
					if _, seen := open[svc]; !seen {
						order = append(order, svc)
					}
					open[svc] = p
				}
				sp.CopyTo(p.spans.AppendEmpty())
				if p.spans.Len() == batchSpans {
					out = append(out, p.td)
					open[svc] = nil
				}
			}
		}
	}
	for _, svc := range order {
		if p := open[svc]; p != nil {
			out = append(out, p.td)
		}
	}
	return out
}
