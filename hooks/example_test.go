// SPDX-License-Identifier: Apache-2.0

package hooks_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"github.com/errorownership/errorownership/hooks/hints"
	"github.com/errorownership/errorownership/hooks/hookshttp"
)

// A checkout service with the hooks: three lines of setup. Its payments
// dependency is down and claims its errors, so checkout retries payments
// (its neighbour, where the error began) and then answers unclaimed, so
// that checkout's own callers do not retry it and multiply the load.
func Example() {
	// Stand-ins for the collector that serves hints, and for payments
	// (which has the hooks too, and fails on its own).
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"version":1,"service":"checkout","ttl_seconds":30,"edges":[]}`)
	}))
	defer collector.Close()
	var paymentsServed atomic.Int32
	payments := httptest.NewServer(hookshttp.Middleware(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		paymentsServed.Add(1)
		http.Error(w, "card processor down", http.StatusServiceUnavailable)
	})))
	defer payments.Close()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()

	// Checkout's handler, as it would be without the hooks.
	var client *http.Client
	mux := http.NewServeMux()
	mux.HandleFunc("GET /checkout", func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, payments.URL+"/charge", nil)
		res, err := client.Do(req)
		if err != nil || res.StatusCode != http.StatusOK {
			http.Error(w, "payment failed", http.StatusBadGateway)
			return
		}
		res.Body.Close()
		_, _ = io.WriteString(w, "paid")
	})

	// The three lines of setup: hints, the client transport, the middleware.
	h := hints.Start(ctx, collector.URL, "checkout")
	client = &http.Client{Transport: hookshttp.Transport(http.DefaultTransport, hookshttp.WithHints(h))}
	handler := hookshttp.Middleware(mux, hookshttp.WithHints(h))

	checkout := httptest.NewServer(handler)
	defer checkout.Close()
	res, err := http.Get(checkout.URL + "/checkout")
	if err != nil {
		fmt.Println(err)
		return
	}
	res.Body.Close()
	fmt.Println("payments served", paymentsServed.Load(), "requests")
	fmt.Println("checkout answered", res.Status, "with Error-Claim:", res.Header.Get("Error-Claim"))
	// Output:
	// payments served 3 requests
	// checkout answered 502 Bad Gateway with Error-Claim: unclaimed
}
