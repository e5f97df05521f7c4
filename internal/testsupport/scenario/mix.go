// SPDX-License-Identifier: Apache-2.0

package scenario

import (
	"strconv"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Mix returns a benchmark workload of traces root requests to a small
// shop: 7 services, 20 spans a trace (10 SERVER, 10 CLIENT, one of them a
// cache query), parallel calls, plausible attributes. About 5 % of the
// traces hold an error somewhere; catalog and cart retry a failed call
// once, so most errors are retried and some still fail the request. The
// same seed gives the same traces.
func Mix(traces int, seed int64) ptrace.Traces {
	rng := splitMix(uint64(seed))
	chance := func(p float64) bool { return rng.float() < p }
	work := func(r *Request, upTo time.Duration) { r.Work(time.Duration(rng.next() % uint64(upTo))) }
	failing := func(p float64, upTo time.Duration) Handler {
		return func(r *Request) Response {
			work(r, upTo)
			if chance(p) {
				return Fail()
			}
			return OK()
		}
	}

	w := NewWorld("mix/" + strconv.FormatInt(seed, 10))
	w.Service("frontend").Handle("GET /home", func(r *Request) Response {
		if r.Call("auth", "POST /verify").Failed {
			return Fail()
		}
		res := r.Parallel(
			Target{Service: "catalog", Operation: "GET /products"},
			Target{Service: "cart", Operation: "GET /cart"},
			Target{Service: "recommend", Operation: "GET /recommendations"}, // fail-open
		)
		if res[0].Failed || res[1].Failed || chance(0.003) {
			return Fail()
		}
		return OK()
	})
	w.Service("auth").Handle("POST /verify", failing(0.002, 2*time.Millisecond))
	w.Service("catalog").Retry(RetryOnce).
		Handle("GET /products", func(r *Request) Response {
			res := r.Parallel(
				Target{Service: "pricing", Operation: "GET /prices"},
				Target{Service: "inventory", Operation: "GET /stock"},
			)
			if res[0].Failed || res[1].Failed {
				return Fail()
			}
			return OK()
		}).
		Handle("GET /products/{id}", failing(0, 3*time.Millisecond))
	cache := DB{System: "redis", Name: "cart-cache"}
	w.Service("cart").Retry(RetryOnce).Handle("GET /cart", func(r *Request) Response {
		r.Query(cache, "HGETALL cart")
		if r.Call("pricing", "GET /prices").Failed || r.Call("inventory", "GET /stock").Failed {
			return Fail()
		}
		return OK()
	})
	w.Service("recommend").Handle("GET /recommendations", func(r *Request) Response {
		work(r, 5*time.Millisecond)
		if r.Call("catalog", "GET /products/{id}").Failed {
			return Fail()
		}
		return OK()
	})
	w.Service("pricing").Handle("GET /prices", failing(0.005, 2*time.Millisecond))
	w.Service("inventory").Handle("GET /stock", failing(0.02, 4*time.Millisecond))

	w.Roots(traces, "frontend", "GET /home")
	return w.Traces()
}

// splitMix is the SplitMix64 generator: small, fast and the same on every
// Go version, so a seed always gives the same traces.
type splitMixState struct{ s uint64 }

func splitMix(seed uint64) *splitMixState { return &splitMixState{s: seed} }

func (g *splitMixState) next() uint64 {
	g.s += 0x9e3779b97f4a7c15
	z := g.s
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// float returns a number in [0, 1).
func (g *splitMixState) float() float64 { return float64(g.next()>>11) / (1 << 53) }
