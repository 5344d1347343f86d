package runtime

import (
	"testing"
	"time"
)

// TestConfigRule: every limit and duration reads zero as its default and a
// negative value as none (zero inside the runtime), and keeps a positive
// value.
func TestConfigRule(t *testing.T) {
	type field struct {
		name string
		set  func(*Config, int64)
		get  func(Config) int64
		def  int64
	}
	d := func(f func(*Config) *time.Duration) (func(*Config, int64), func(Config) int64) {
		return func(c *Config, v int64) { *f(c) = time.Duration(v) }, func(c Config) int64 { return int64(*f(&c)) }
	}
	n := func(f func(*Config) *int) (func(*Config, int64), func(Config) int64) {
		return func(c *Config, v int64) { *f(c) = int(v) }, func(c Config) int64 { return int64(*f(&c)) }
	}
	var fields []field
	add := func(name string, def int64, set func(*Config, int64), get func(Config) int64) {
		fields = append(fields, field{name, set, get, def})
	}
	s, g := d(func(c *Config) *time.Duration { return &c.WriteTimeout })
	add("WriteTimeout", int64(DefaultWriteTimeout), s, g)
	s, g = d(func(c *Config) *time.Duration { return &c.Linger })
	add("Linger", int64(DefaultLinger), s, g)
	s, g = d(func(c *Config) *time.Duration { return &c.IdleTimeout })
	add("IdleTimeout", 0, s, g)
	s, g = d(func(c *Config) *time.Duration { return &c.MaxLifetime })
	add("MaxLifetime", 0, s, g)
	s, g = d(func(c *Config) *time.Duration { return &c.WaitMin })
	add("WaitMin", int64(DefaultWaitMin), s, g)
	s, g = n(func(c *Config) *int { return &c.MaxOutbound })
	add("MaxOutbound", DefaultMaxOutbound, s, g)
	s, g = n(func(c *Config) *int { return &c.TurnBudget })
	add("TurnBudget", DefaultTurnBudget, s, g)
	s, g = n(func(c *Config) *int { return &c.MaxPosted })
	add("MaxPosted", DefaultMaxPosted, s, g)
	s, g = n(func(c *Config) *int { return &c.MaxGo })
	add("MaxGo", DefaultMaxGo, s, g)
	s, g = n(func(c *Config) *int { return &c.MaxConns })
	add("MaxConns", 0, s, g)
	s, g = n(func(c *Config) *int { return &c.WaitBatch })
	add("WaitBatch", 0, s, g)
	s, g = n(func(c *Config) *int { return &c.ReturnAfterStorm })
	add("ReturnAfterStorm", DefaultReturnAfterStorm, s, g)
	for _, f := range fields {
		t.Run(f.name, func(t *testing.T) {
			for _, tc := range []struct {
				in, want int64
			}{{0, f.def}, {-1, 0}, {7, 7}} {
				var c Config
				f.set(&c, tc.in)
				if err := c.validate(); err != nil {
					t.Fatalf("%d: %v", tc.in, err)
				}
				if got := f.get(c.withDefaults()); got != tc.want {
					t.Errorf("%s %d: got %d, want %d", f.name, tc.in, got, tc.want)
				}
			}
		})
	}
	t.Run("RingFlags", func(t *testing.T) {
		if got := *(Config{}).withDefaults().RingFlags; got != DefaultRingFlags {
			t.Errorf("nil: %v, want %v", got, DefaultRingFlags)
		}
		none := RingFlags(0)
		if got := *(Config{RingFlags: &none}).withDefaults().RingFlags; got != 0 {
			t.Errorf("pointer to none: %v", got)
		}
	})
}
