// SPDX-License-Identifier: Apache-2.0

package hooks

import (
	"context"
	"sync"

	"github.com/errorownership/errorownership/ownership"
)

// inlineCalls is how many calls a Ledger holds without allocating; most
// requests make fewer outbound calls than this. It is small so that a
// middleware's whole per-request state fits a 512-byte allocation, the
// largest the Go allocator serves without a per-object header.
const inlineCalls = 3

// A Ledger records the outbound logical calls of one inbound request, so the
// server middleware can decide the claim when the request fails. Client hooks
// find it in the request's context (LedgerFrom) and record each call with
// Begin and End; calls of a fan-out may record concurrently.
//
// The zero Ledger is ready to use. All methods are safe on a nil *Ledger and
// do nothing, so a client hook needs no branch for calls made outside a
// server request.
type Ledger struct {
	ctx ledgerContext // the context Bind returns, kept here to save an allocation

	mu     sync.Mutex
	n      int32                // calls begun
	done   uint32               // bit i: inline call i has ended
	inline [inlineCalls]Outcome // the first calls
	more   *[]entry             // the others; a pointer keeps the Ledger small
}

type entry struct {
	o    Outcome
	done bool
}

// Call identifies a call begun on a Ledger.
type Call int

// noCall is what Begin returns on a nil Ledger.
const noCall Call = -1

type ledgerKey struct{}

// ledgerContext carries a Ledger. It is a context.Context of its own rather
// than context.WithValue so that it can live inside the Ledger (and the
// Ledger inside a middleware's per-request state): one allocation per
// request instead of three.
type ledgerContext struct {
	context.Context
	l *Ledger
}

func (c *ledgerContext) Value(key any) any {
	if key == (ledgerKey{}) {
		return c.l
	}
	return c.Context.Value(key)
}

// WithLedger returns a copy of ctx that carries a new Ledger, and the Ledger.
func WithLedger(ctx context.Context) (context.Context, *Ledger) {
	l := new(Ledger)
	return l.Bind(ctx), l
}

// Bind returns a copy of parent that carries l. It exists so that middleware
// can embed a Ledger in its own per-request state and allocate both at once;
// WithLedger is the plain way. Bind a Ledger once, before any call records.
func (l *Ledger) Bind(parent context.Context) context.Context {
	l.ctx = ledgerContext{Context: parent, l: l}
	return &l.ctx
}

// LedgerFrom returns the Ledger ctx carries, or nil.
func LedgerFrom(ctx context.Context) *Ledger {
	l, _ := ctx.Value(ledgerKey{}).(*Ledger)
	return l
}

// Begin notes that an outbound logical call to peerService started. Until
// End, Outcomes reports the call as in flight.
func (l *Ledger) Begin(peerService string) Call {
	if l == nil {
		return noCall
	}
	l.mu.Lock()
	c := Call(l.n)
	if c < inlineCalls {
		l.inline[c] = Outcome{PeerService: peerService}
	} else {
		if l.more == nil {
			l.more = new([]entry)
		}
		*l.more = append(*l.more, entry{o: Outcome{PeerService: peerService}})
	}
	l.n++
	l.mu.Unlock()
	return c
}

// End records the final outcome of call c.
func (l *Ledger) End(c Call, o Outcome) {
	if l == nil || c < 0 {
		return
	}
	l.mu.Lock()
	switch {
	case int32(c) >= l.n:
	case c < inlineCalls:
		l.inline[c] = o
		l.done |= 1 << c
	default:
		(*l.more)[c-inlineCalls] = entry{o: o, done: true}
	}
	l.mu.Unlock()
}

// Record records a finished call in one step, for instrumentation that does
// not track calls in flight.
func (l *Ledger) Record(o Outcome) { l.End(l.Begin(o.PeerService), o) }

// Outcomes appends to dst a snapshot of every call recorded so far, in the
// order they began, and returns the extended slice. A call not yet ended is
// reported as in flight, with only its peer service known.
func (l *Ledger) Outcomes(dst []Outcome) []Outcome {
	if l == nil {
		return dst
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range min(int(l.n), inlineCalls) {
		o := l.inline[i]
		if l.done&(1<<i) == 0 {
			o = Outcome{PeerService: o.PeerService, InFlight: true}
		}
		dst = append(dst, o)
	}
	if l.more != nil {
		for _, e := range *l.more {
			o := e.o
			if !e.done {
				o = Outcome{PeerService: o.PeerService, InFlight: true}
			}
			dst = append(dst, o)
		}
	}
	return dst
}

// Decide snapshots the Ledger and applies Claim to it. timedOut is as for
// Claim, and is also assumed when a call is still in flight: a request that
// answers while it waits on a call gave up waiting on it.
func (l *Ledger) Decide(modes ModeFunc, timedOut bool) (ownership.Claim, ownership.Reason) {
	var buf [2 * inlineCalls]Outcome
	outcomes := l.Outcomes(buf[:0])
	for i := range outcomes {
		if outcomes[i].InFlight {
			timedOut = true
		}
	}
	return Claim(outcomes, modes, timedOut)
}
