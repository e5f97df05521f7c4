// SPDX-License-Identifier: Apache-2.0

// Package truth is what the shop app's services write about each request
// they serve, and the end-to-end tests read back: the ground truth the
// collector's verdicts are checked against.
package truth

// TraceHeader carries the trace ID of a shop request back to the driver.
const TraceHeader = "Shop-Trace-Id"

// Record is one line of a service's truth file: one request it served.
type Record struct {
	TraceID string `json:"trace_id"`
	SpanID  string `json:"span_id"`
	// Own: the service failed for its own reason.
	Own bool `json:"own,omitempty"`
	// Failed names the callees whose call's last attempt failed.
	Failed []string `json:"failed,omitempty"`
	// Status is the HTTP status answered, or the gRPC code.
	Status int `json:"status"`
	// Claim is the Error-Claim the service sent ("" for none).
	Claim string `json:"claim,omitempty"`
}
