// SPDX-License-Identifier: Apache-2.0

package ownership

// Mode is what the dependency analysis learned about an edge: whether the
// inbound request fails when the outbound call fails (docs/design.md §5).
type Mode uint8

// The modes. The zero value is ModeUnknown, which the verdicts and the
// hooks treat as fail-close: without evidence that a failure is tolerated,
// a service must assume it propagated the failure and unclaim, never the
// other way round.
const (
	// ModeUnknown: too few samples, or behaviour between the thresholds.
	ModeUnknown Mode = iota
	// ModeFailClose: when the call fails, the request fails.
	ModeFailClose
	// ModeFailOpen: the service tolerates the call failing.
	ModeFailOpen
)

var modeNames = [...]string{ModeUnknown: "unknown", ModeFailClose: "fail_close", ModeFailOpen: "fail_open"}

// String returns the hints spelling: "unknown", "fail_close" or "fail_open".
func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return "unknown"
}

// ParseMode reads a Mode's spelling; anything else is ModeUnknown, the safe
// reading.
func ParseMode(s string) Mode {
	for m, name := range modeNames {
		if name == s {
			return Mode(m)
		}
	}
	return ModeUnknown
}

// MarshalText writes the hints spelling, so that a Mode is a JSON string.
func (m Mode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText reads the hints spelling. It never fails: an unknown mode
// from a newer collector is ModeUnknown.
func (m *Mode) UnmarshalText(b []byte) error {
	*m = ParseMode(string(b))
	return nil
}
