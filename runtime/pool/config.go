package pool

import (
	"math"
	"time"

	"github.com/percore/percore/internal/limit"
)

// Config configures a Pool. The zero value is bb8's defaults, per loop: at
// most 10 connections, no minimum of idle ones, a 30 s connection timeout, a
// 10 min idle timeout, a 30 min maximum lifetime, connections validated on
// checkout, and maintenance every 30 s.
//
// Every limit and duration follows one rule, the runtime's too: zero means
// the default (the Default constants), and a negative value means none (no
// limit, no timeout, never).
type Config struct {
	// MaxSize is the most connections a loop holds: idle, lent out,
	// being validated or being opened. Zero means DefaultMaxSize (10);
	// negative means no limit.
	MaxSize int
	// MinIdle is how many idle connections Maintain (and a new Local)
	// opens ahead of demand. Zero (the default) and negative mean none;
	// more than MaxSize is clamped to MaxSize.
	MinIdle int
	// ConnectionTimeout bounds a whole get: waiting for a connection,
	// validating it and opening one. A get that runs out of it ends with
	// ErrTimeout. Zero means DefaultConnectionTimeout (30 s); negative
	// means a get waits as long as it takes.
	ConnectionTimeout time.Duration
	// IdleTimeout closes pooled connections idle for longer. Zero means
	// DefaultIdleTimeout (10 min); negative means never.
	IdleTimeout time.Duration
	// MaxLifetime closes connections older than this (on checkout, on
	// return and when reaped). Zero means DefaultMaxLifetime (30 min);
	// negative means never.
	MaxLifetime time.Duration
	// SkipTestOnCheckout lends idle connections without asking the
	// Manager to validate them first. The zero value validates.
	SkipTestOnCheckout bool
	// ReapInterval is how often each loop runs Maintain on a timer. Zero
	// means DefaultReapInterval (30 s); negative means never (call
	// Maintain yourself).
	ReapInterval time.Duration
	// Clock returns the current time, for expiry and wait statistics.
	// Nil means the loop's own clock (read once per loop turn) when the
	// Loop has a Now method, as *percore.Loop does, else time.Now. Tests
	// inject a fake clock here.
	Clock func() time.Time
}

// The defaults a zero Config field stands for (bb8's).
const (
	DefaultMaxSize           = 10
	DefaultConnectionTimeout = 30 * time.Second
	DefaultIdleTimeout       = 10 * time.Minute
	DefaultMaxLifetime       = 30 * time.Minute
	DefaultReapInterval      = 30 * time.Second
)

// settings is a Config with its defaults resolved; a zero duration means
// never.
type settings struct {
	maxSize        int
	minIdle        int
	timeout        time.Duration
	idleTimeout    time.Duration
	maxLifetime    time.Duration
	testOnCheckout bool
	reapInterval   time.Duration
	clock          func() time.Time // Config.Clock: nil means each Local picks (see newLocal)
	expires        bool             // idleTimeout or maxLifetime is set
}

func (c Config) resolve() (settings, error) {
	s := settings{
		maxSize:        limit.OrDefault(c.MaxSize, DefaultMaxSize),
		minIdle:        max(c.MinIdle, 0),
		timeout:        limit.OrDefault(c.ConnectionTimeout, DefaultConnectionTimeout),
		idleTimeout:    limit.OrDefault(c.IdleTimeout, DefaultIdleTimeout),
		maxLifetime:    limit.OrDefault(c.MaxLifetime, DefaultMaxLifetime),
		testOnCheckout: !c.SkipTestOnCheckout,
		reapInterval:   limit.OrDefault(c.ReapInterval, DefaultReapInterval),
		clock:          c.Clock,
	}
	if s.maxSize == 0 {
		s.maxSize = math.MaxInt // no limit
	}
	s.minIdle = min(s.minIdle, s.maxSize)
	s.expires = s.idleTimeout > 0 || s.maxLifetime > 0
	return s, nil
}

// config returns the settings as a Config with every default filled in
// (never as -1), except Clock: nil stays nil, so that the Config given to
// New again keeps each loop's own clock.
func (s settings) config() Config {
	never := func(d time.Duration) time.Duration {
		if d == 0 {
			return -1
		}
		return d
	}
	maxSize := s.maxSize
	if maxSize == math.MaxInt {
		maxSize = -1
	}
	return Config{
		MaxSize:            maxSize,
		MinIdle:            s.minIdle,
		ConnectionTimeout:  never(s.timeout),
		IdleTimeout:        never(s.idleTimeout),
		MaxLifetime:        never(s.maxLifetime),
		SkipTestOnCheckout: !s.testOnCheckout,
		ReapInterval:       never(s.reapInterval),
		Clock:              s.clock,
	}
}
