// SPDX-License-Identifier: Apache-2.0

package ownership

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
