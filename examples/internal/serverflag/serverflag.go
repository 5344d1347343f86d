//go:build linux

// Package serverflag is the flag set every example server takes, so that the
// same thing has the same flag in every program (as every Go command takes
// -h):
//
//	-addr     where the server listens (its network is the program's: TCP for
//	          most, UDP for udp_echo, a socket path or @name for unix_echo)
//	-cores    the CPU list for the loops, in the kernel's list format ("0-3,8");
//	          empty: the affinity mask, at most GOMAXPROCS of it
//	-backend  auto, uring or epoll
//	-metrics  an address to serve Prometheus metrics at /metrics and the Go
//	          profiles at /debug/pprof/ on (package runtime/metrics); empty: off
//	-uring-features
//	          the io_uring features the loops use where the kernel has them
//	          (percore.ParseUringFeatures: default, none, or a list such as
//	          registered_ring,skip_sends,direct_descriptors), for A/B runs of each
//	-zero-copy-min
//	          the smallest send that goes with zero copy under zero_copy_send
//	          (Config.ZeroCopySendMin; 0: the default)
//
// A bad -cores or -backend is refused by flag.Parse with the flag's name,
// the value and what is wrong, before anything starts. A program registers
// the set on its FlagSet, parses, then copies the parsed values into its
// runtime.Config with Apply and starts the metrics side port with
// ServeMetrics:
//
//	sf := serverflag.Register(flag.CommandLine, "127.0.0.1:7000")
//	flag.Parse()
//	cfg := percore.Config{Addr: sf.Addr}
//	sf.Apply(&cfg)
//	rt, err := percore.New(cfg, h)
//	...
//	ms, err := sf.ServeMetrics(rt) // nil without -metrics
package serverflag

import (
	"flag"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/percore/percore/cpu"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/metrics"
)

// Flags holds the parsed values of the four flags. Register returns it; its
// fields are set when the FlagSet is parsed.
type Flags struct {
	// Addr is -addr: the listen address, in the program's own network.
	Addr string
	// Cores is -cores, parsed by cpu.ParseList (a CPU listed twice is an
	// error, as in Config.Cores: one loop per CPU): nil for the default.
	Cores []int
	// Backend is -backend; Auto (the zero value) by default.
	Backend percore.Backend
	// Metrics is -metrics: the metrics side port's address, empty for none.
	Metrics string
	// UringFeatures is -uring-features: nil for the default.
	UringFeatures *percore.UringFeatures
	// ZeroCopySendMin is -zero-copy-min: 0 for the default.
	ZeroCopySendMin int
	// BufferSize is -buffer-size: 0 for the default.
	BufferSize int
}

// Register defines -addr (with addr as its default), -cores, -backend and
// -metrics on fs and returns the Flags they are parsed into.
func Register(fs *flag.FlagSet, addr string) *Flags {
	f := &Flags{Addr: addr}
	fs.StringVar(&f.Addr, "addr", addr, "listen address")
	fs.Var((*coresValue)(&f.Cores), "cores", "CPU list for the loops, e.g. 0-3,8 (default: the affinity mask, at most GOMAXPROCS of it)")
	fs.Var((*backendValue)(&f.Backend), "backend", "auto, uring or epoll")
	fs.StringVar(&f.Metrics, "metrics", "", "serve Prometheus metrics at /metrics and pprof at /debug/pprof/ on this address, e.g. 127.0.0.1:9100 (default: off)")
	fs.Var(&featuresValue{&f.UringFeatures}, "uring-features", "io_uring features to use where the kernel has them: default, none, or a list of registered_ring,skip_sends,napi,direct_descriptors,incremental_buffers,zero_copy_send,bundles")
	fs.IntVar(&f.ZeroCopySendMin, "zero-copy-min", 0, "with zero_copy_send, the smallest send in bytes that goes with zero copy (default: percore.DefaultZeroCopySendMin)")
	fs.IntVar(&f.BufferSize, "buffer-size", 0, "bytes of each stream receive buffer, the most one OnData is given (default: percore.DefaultBufferSize)")
	return f
}

// Apply sets cfg's Cores, Backend, UringFeatures, ZeroCopySendMin and BufferSize from the flags. It leaves cfg.Addr to
// the caller, because what -addr names depends on the program: Config.Addr
// for a TCP server, a Config.Listen entry for a UDP or Unix one.
func (f *Flags) Apply(cfg *percore.Config) {
	cfg.Cores = f.Cores
	cfg.Backend = f.Backend
	cfg.UringFeatures = f.UringFeatures
	cfg.ZeroCopySendMin = f.ZeroCopySendMin
	cfg.BufferSize = f.BufferSize
}

// featuresValue is -uring-features, checked when it is parsed.
type featuresValue struct{ p **percore.UringFeatures }

func (v *featuresValue) String() string {
	if v == nil || v.p == nil || *v.p == nil {
		return "default"
	}
	return (*v.p).String()
}

func (v *featuresValue) Set(s string) error {
	f, err := percore.ParseUringFeatures(s)
	if err != nil {
		return err
	}
	*v.p = &f
	return nil
}

// ServeMetrics serves rt's counters and the extra collectors (a pool's, say)
// on the -metrics address with metrics.Listen. Without -metrics it returns
// nil and no error; the caller closes a non-nil Server when it is done.
func (f *Flags) ServeMetrics(rt *percore.Runtime, extra ...prometheus.Collector) (*metrics.Server, error) {
	if f.Metrics == "" {
		return nil, nil
	}
	return metrics.Listen(f.Metrics, rt, extra...)
}

// coresValue is -cores: a CPU list, checked when it is parsed.
type coresValue []int

func (v *coresValue) String() string {
	if v == nil {
		return ""
	}
	return cpu.FormatList(*v)
}

func (v *coresValue) Set(s string) error {
	list, err := cpu.ParseList(s)
	if err != nil {
		return err
	}
	*v = list
	return nil
}

// backendValue is -backend, checked when it is parsed.
type backendValue percore.Backend

func (v *backendValue) String() string {
	if v == nil {
		return percore.Auto.String()
	}
	return percore.Backend(*v).String()
}

func (v *backendValue) Set(s string) error {
	b, err := percore.ParseBackend(s)
	if err != nil {
		return err
	}
	*v = backendValue(b)
	return nil
}
