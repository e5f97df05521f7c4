// SPDX-License-Identifier: Apache-2.0

package store

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/ownership"
)

// TestCorrection: a bucket's first flush counts a held request's
// provisional verdict, a later flush of the bucket its correction; the
// tables then hold what one flush of the final verdict would have written,
// the writer writes nothing more when the final verdict counts the same,
// and a correction of a flush that never reached the store is dropped with
// it rather than take away what was never added.
func TestCorrection(t *testing.T) {
	type verdict struct {
		kind     dependencyanalysis.VerdictKind
		expected ownership.Claim
	}
	propagated := verdict{dependencyanalysis.VerdictPropagated, ownership.ClaimUnclaimed}
	coincidental := verdict{dependencyanalysis.VerdictCoincidental, ownership.ClaimClaimed}
	tests := []struct {
		name               string
		provisional, final verdict
		firstLost          bool // the corrected flush never reached the store
		written, dropped   uint64
		// weight is the held request's trace's adjusted count: 1 for a
		// counted trace, else extrapolated from its sampling.
		weight float64
	}{
		{"the final verdict counts the same: nothing more written", propagated, propagated, false, 1, 0, 1},
		{"coincidental after all", propagated, coincidental, false, 2, 0, 1},
		{"another claim expected", propagated, verdict{dependencyanalysis.VerdictPropagated, ownership.ClaimClaimed}, false, 2, 0, 1},
		{"a coincidental provisional verdict taken back: its audit entry deleted", coincidental, propagated, false, 2, 0, 1},
		{"the corrected flush was lost: so is its correction", propagated, coincidental, true, 0, 1, 1},
		{"weighted: the same verdict, nothing more written", propagated, propagated, false, 1, 0, 16},
		{"weighted: coincidental after all, estimates moved by the weight", propagated, coincidental, false, 2, 0, 16},
		{"weighted: a coincidental verdict taken back", coincidental, propagated, false, 2, 0, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t)
			names := dependencyanalysis.NewSymbols(0)
			at := pcommon.NewTimestampFromTime(t0.Add(5 * time.Second))
			method := dependencyanalysis.SamplingCounted
			if tc.weight != 1 {
				method = dependencyanalysis.SamplingExtrapolated
			}
			h := dependencyanalysis.Held{
				Weight: tc.weight, Method: method,
				Time: at, TraceID: pcommon.TraceID{1, 2, 3}, SpanID: pcommon.SpanID{4, 5, 6},
				Service: names.Intern("checkout"), Operation: names.Intern("POST /checkout"), Sent: ownership.ClaimUnclaimed,
				Provisional: tc.provisional.kind, ProvisionalExpected: tc.provisional.expected,
				Calls: []dependencyanalysis.HeldCall{{PeerService: names.Intern("recs"), PeerOperation: names.Intern("GET /recs")}},
			}
			final := dependencyanalysis.Verdict{Kind: tc.final.kind, Expected: tc.final.expected, Sent: h.Sent, FailedCalls: []int32{0}}

			// The bucket: the held request and one settled beside it.
			first := newBuilder(names)
			op := first.op("checkout", "POST /checkout")
			op.Served, op.Failed = 2, 1
			op.Verdicts[dependencyanalysis.VerdictOwn] = 1
			op.Claims[ownership.ClaimClaimed][dependencyanalysis.VerdictOwn] = 1
			op.ExpectedClaims[ownership.ClaimClaimed], op.ClaimsCorrect = 1, 1
			first.s.AddProvisional(&h)
			late := dependencyanalysis.NewStats()
			late.Correct(&h, &final)
			correction := Flush{Instance: "a", Seq: 2, Corrects: 1, Bucket: t0, Stats: late, Names: names}

			s := newStore(t)
			w := NewWriter(s)
			if err := w.Start(ctx); err != nil {
				t.Fatal(err)
			}
			if !tc.firstLost {
				w.Enqueue(first.flush("a", 1, t0))
			}
			w.Enqueue(correction)
			if err := w.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			st := w.Stats()
			if st.WrittenFlushes != tc.written || st.DroppedFlushes != tc.dropped {
				t.Errorf("flushes written %d, dropped %d; want %d, %d", st.WrittenFlushes, st.DroppedFlushes, tc.written, tc.dropped)
			}

			// What one flush of the final verdicts writes, by hand.
			want := newStore(t)
			if !tc.firstLost {
				ref := newBuilder(names)
				op := ref.op("checkout", "POST /checkout")
				op.Served, op.Failed = 2, 1
				op.Verdicts[dependencyanalysis.VerdictOwn] = 1
				op.Claims[ownership.ClaimClaimed][dependencyanalysis.VerdictOwn] = 1
				op.ExpectedClaims[ownership.ClaimClaimed], op.ClaimsCorrect = 1, 1
				// The settled request counted; the held one counts its
				// final verdict at its trace's weight.
				countedEstimates(ref.s)
				est := &op.Est[method]
				op.Failed++
				est.Failed += tc.weight
				op.Verdicts[tc.final.kind]++
				est.Verdicts[tc.final.kind] += tc.weight
				op.Claims[ownership.ClaimUnclaimed][tc.final.kind]++
				est.Claims[ownership.ClaimUnclaimed][tc.final.kind] += tc.weight
				op.ExpectedClaims[tc.final.expected]++
				est.ExpectedClaims[tc.final.expected] += tc.weight
				if tc.final.expected == ownership.ClaimUnclaimed {
					op.ClaimsCorrect++
					est.ClaimsCorrect += tc.weight
				}
				if tc.final.kind == dependencyanalysis.VerdictCoincidental {
					ref.s.Audit = append(ref.s.Audit, dependencyanalysis.AuditEntry{
						Time: at, TraceID: h.TraceID, SpanID: h.SpanID, Service: h.Service, Operation: h.Operation,
						PeerService: h.Calls[0].PeerService, PeerOperation: h.Calls[0].PeerOperation,
						ClaimSent: ownership.ClaimUnclaimed, ClaimExpected: tc.final.expected, Weight: tc.weight,
					})
				}
				if _, err := want.Write(ctx, ref.flush("ref", 1, t0)); err != nil {
					t.Fatal(err)
				}
			}
			got, wantTables := dump(t, s), dump(t, want)
			for table := range wantTables {
				if !reflect.DeepEqual(got[table], wantTables[table]) {
					t.Errorf("table %s differs: %s", table, diffLines(got[table], wantTables[table]))
				}
			}

			// Written again, as after an unknown outcome: counted once.
			dup, err := s.Write(ctx, correction)
			switch {
			case tc.firstLost:
				if !errors.Is(err, ErrCorrectsUnwritten) {
					t.Errorf("a correction of a flush not written: %v, want ErrCorrectsUnwritten", err)
				}
			case tc.written == 2:
				if err != nil || !dup {
					t.Errorf("a correction written again: duplicate %v, %v", dup, err)
				}
			}
			if tc.written == 2 || tc.firstLost {
				if again := dump(t, s); !reflect.DeepEqual(again, got) {
					t.Error("writing the correction again changed the tables")
				}
			}
		})
	}
}
