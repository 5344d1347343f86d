package pool

import (
	"fmt"
	"time"
)

// Config configures a Pool. The zero value is bb8's defaults, per loop: at
// most 10 connections, no minimum of idle ones, a 30 s connection timeout, a
// 10 min idle timeout, a 30 min maximum lifetime, connections validated on
// checkout, and maintenance every 30 s.
type Config struct {
	// MaxSize is the most connections a loop holds: idle, lent out,
	// being validated or being opened. Zero means 10.
	MaxSize int
	// MinIdle is how many idle connections Maintain (and a new Local)
	// opens ahead of demand. Zero means none; more than MaxSize is clamped
	// to MaxSize.
	MinIdle int
	// ConnectionTimeout bounds a whole get: waiting for a connection,
	// validating it and opening one. A get that runs out of it ends with
	// ErrTimeout. Zero means 30 s.
	ConnectionTimeout time.Duration
	// IdleTimeout closes connections idle for longer. Zero means 10 min;
	// negative means never.
	IdleTimeout time.Duration
	// MaxLifetime closes connections older than this (on checkout, on
	// return and when reaped). Zero means 30 min; negative means never.
	MaxLifetime time.Duration
	// SkipTestOnCheckout lends idle connections without asking the
	// Manager to validate them first. The zero value validates.
	SkipTestOnCheckout bool
	// ReapInterval is how often each loop runs Maintain on a timer. Zero
	// means 30 s; negative means never (call Maintain yourself).
	ReapInterval time.Duration
	// Clock returns the current time, for expiry and wait statistics.
	// Nil means the loop's own clock (read once per loop turn) when the
	// Loop has a Now method, as *percore.Loop does, else time.Now. Tests
	// inject a fake clock here.
	Clock func() time.Time
}

const (
	defaultMaxSize           = 10
	defaultConnectionTimeout = 30 * time.Second
	defaultIdleTimeout       = 10 * time.Minute
	defaultMaxLifetime       = 30 * time.Minute
	defaultReapInterval      = 30 * time.Second
)

// settings is a validated Config with its defaults resolved; a zero duration
// means never.
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
	if c.MaxSize < 0 {
		return settings{}, fmt.Errorf("pool: config: negative max size %d", c.MaxSize)
	}
	if c.MinIdle < 0 {
		return settings{}, fmt.Errorf("pool: config: negative min idle %d", c.MinIdle)
	}
	if c.ConnectionTimeout < 0 {
		return settings{}, fmt.Errorf("pool: config: negative connection timeout %v", c.ConnectionTimeout)
	}
	s := settings{
		maxSize:        c.MaxSize,
		minIdle:        c.MinIdle,
		timeout:        c.ConnectionTimeout,
		idleTimeout:    orDefault(c.IdleTimeout, defaultIdleTimeout),
		maxLifetime:    orDefault(c.MaxLifetime, defaultMaxLifetime),
		testOnCheckout: !c.SkipTestOnCheckout,
		reapInterval:   orDefault(c.ReapInterval, defaultReapInterval),
		clock:          c.Clock,
	}
	if s.maxSize == 0 {
		s.maxSize = defaultMaxSize
	}
	s.minIdle = min(s.minIdle, s.maxSize)
	if s.timeout == 0 {
		s.timeout = defaultConnectionTimeout
	}
	s.expires = s.idleTimeout > 0 || s.maxLifetime > 0
	return s, nil
}

// orDefault maps zero to def and a negative duration to zero (never).
func orDefault(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
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
	return Config{
		MaxSize:            s.maxSize,
		MinIdle:            s.minIdle,
		ConnectionTimeout:  s.timeout,
		IdleTimeout:        never(s.idleTimeout),
		MaxLifetime:        never(s.maxLifetime),
		SkipTestOnCheckout: !s.testOnCheckout,
		ReapInterval:       never(s.reapInterval),
		Clock:              s.clock,
	}
}
