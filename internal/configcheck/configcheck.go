// SPDX-License-Identifier: Apache-2.0

// Package configcheck holds the checks the collector configurations of the
// processor and the store share, so that they word their errors alike.
package configcheck

import (
	"cmp"
	"fmt"
	"time"
)

// TooShort reports duration key, d, below its minimum least, naming an
// example value; a bare number, which the collector reads as nanoseconds,
// is called one.
func TooShort(key string, d, least time.Duration, example string) error {
	if d <= 0 {
		return fmt.Errorf("%s: %v must be positive, such as %s", key, d, example)
	}
	return fmt.Errorf("%s: %v must be at least %v%s", key, d, least, cmp.Or(BareNumber(d, example), ", such as "+example))
}

// BareNumber explains a duration under a millisecond, which nobody means
// for these keys but which a number written without a unit becomes; ""
// for any other.
func BareNumber(d time.Duration, example string) string {
	if d > 0 && d < time.Millisecond {
		return "; a bare number is read as nanoseconds; write a unit, such as " + example
	}
	return ""
}
