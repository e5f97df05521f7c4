// SPDX-License-Identifier: Apache-2.0

package hooks_test

import (
	"testing"
	"time"

	"github.com/errorownership/errorownership/hooks"
	"github.com/errorownership/errorownership/hooks/internal/conformance"
	"github.com/errorownership/errorownership/ownership"
)

// The conformance vectors of claim.json, retry.json and budget.json: the
// rules every language's hooks obey.

type claimVectors struct {
	Cases []struct {
		Name     string
		Modes    map[string]string
		TimedOut bool `json:"timed_out"`
		Calls    []struct {
			PeerService string `json:"peer_service"`
			Failed      bool
			Received    string
			Decision    string
			InFlight    bool `json:"in_flight"`
			CutShort    bool `json:"cut_short"`
		}
		Want struct{ Claim, Reason string }
	}
}

func TestConformanceClaim(t *testing.T) {
	var v claimVectors
	if err := conformance.Load("claim.json", &v); err != nil {
		t.Fatal(err)
	}
	for _, tc := range v.Cases {
		t.Run(tc.Name, func(t *testing.T) {
			_, ledger := hooks.WithLedger(t.Context())
			for _, c := range tc.Calls {
				call := ledger.Begin(c.PeerService)
				if c.InFlight {
					continue
				}
				ledger.End(call, hooks.Outcome{PeerService: c.PeerService, Failed: c.Failed,
					Received: ownership.ParseClaim(c.Received), Decision: ownership.ParseRetryDecision(c.Decision), InFlight: c.CutShort})
			}
			modes := func(peer, _ string) ownership.Mode { return ownership.ParseMode(tc.Modes[peer]) }
			claim, reason := ledger.Decide(modes, tc.TimedOut)
			if claim.String() != tc.Want.Claim || reason.String() != tc.Want.Reason {
				t.Errorf("claim %s, reason %s; want %s, %s", claim, reason, tc.Want.Claim, tc.Want.Reason)
			}
		})
	}
}

type retryVectors struct {
	Cases []struct {
		Name         string
		Received     string
		HasPolicy    bool `json:"has_policy"`
		AttemptsLeft bool `json:"attempts_left"`
		Budget, Want string
		Withdrawn    bool
	}
}

func TestConformanceRetry(t *testing.T) {
	var v retryVectors
	if err := conformance.Load("retry.json", &v); err != nil {
		t.Fatal(err)
	}
	for _, tc := range v.Cases {
		t.Run(tc.Name, func(t *testing.T) {
			var b *hooks.Budget
			switch tc.Budget {
			case "tokens":
				b = hooks.NewBudget(hooks.Limits{MinRetriesPerSecond: 0.1}) // one retry per 10 s
			case "empty":
				b = hooks.NewBudget(hooks.Limits{})
			case "none":
			default:
				t.Fatalf("budget %q", tc.Budget)
			}
			before := b.Available()
			got := hooks.Retry(ownership.ParseClaim(tc.Received), tc.HasPolicy, tc.AttemptsLeft, b)
			if got.String() != tc.Want {
				t.Errorf("decision %q, want %q", got, tc.Want)
			}
			if withdrawn := b != nil && b.Available() < before; withdrawn != tc.Withdrawn {
				t.Errorf("withdrawn %v, want %v", withdrawn, tc.Withdrawn)
			}
		})
	}
}

type budgetVectors struct {
	Cases []struct {
		Name     string
		WindowMS int64 `json:"window_ms"`
		Limits   hooks.Limits
		Steps    []struct {
			AtMS                int64 `json:"at_ms"`
			Op                  string
			Times               int
			Want                any
			Ratio               float64
			MinRetriesPerSecond float64 `json:"min_retries_per_second"`
		}
	}
}

func TestConformanceBudget(t *testing.T) {
	var v budgetVectors
	if err := conformance.Load("budget.json", &v); err != nil {
		t.Fatal(err)
	}
	for _, tc := range v.Cases {
		t.Run(tc.Name, func(t *testing.T) {
			start := time.Unix(1_800_000_000, 0)
			now := start
			opts := []hooks.BudgetOption{hooks.BudgetClock(func() time.Time { return now })}
			if tc.WindowMS > 0 {
				opts = append(opts, hooks.BudgetWindow(time.Duration(tc.WindowMS)*time.Millisecond))
			}
			b := hooks.NewBudget(tc.Limits, opts...)
			for i, s := range tc.Steps {
				now = start.Add(time.Duration(s.AtMS) * time.Millisecond)
				switch s.Op {
				case "deposit":
					for range s.Times {
						b.Deposit()
					}
				case "withdraw":
					for n := range s.Times {
						if got := b.TryWithdraw(); got != s.Want.(bool) {
							t.Fatalf("step %d at %d ms: withdrawal %d of %d answered %v", i, s.AtMS, n+1, s.Times, got)
						}
					}
				case "available":
					if got := b.Available(); float64(got) != s.Want.(float64) {
						t.Fatalf("step %d at %d ms: available %d, want %v", i, s.AtMS, got, s.Want)
					}
				case "set_limits":
					b.SetLimits(hooks.Limits{Ratio: s.Ratio, MinRetriesPerSecond: s.MinRetriesPerSecond})
				default:
					t.Fatalf("step %d: op %q", i, s.Op)
				}
			}
		})
	}
}
