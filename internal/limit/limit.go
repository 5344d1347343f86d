// Package limit holds the one rule that every limit and duration of
// percore's configurations follows (runtime.Config, pool.Config): zero
// means the default, and a negative value means none.
package limit

import "time"

// OrDefault applies the rule to v: zero gives def, a negative value gives
// zero (which inside percore means none: no limit, no timeout, never), and
// a positive value is kept.
func OrDefault[T int | time.Duration](v, def T) T {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}
