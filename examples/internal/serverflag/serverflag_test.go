//go:build linux

package serverflag

import (
	"flag"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/percore/percore/cpu"
	"github.com/percore/percore/internal/leakcheck"
	percore "github.com/percore/percore/runtime"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

func parse(t *testing.T, args ...string) (*Flags, error) {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := Register(fs, "127.0.0.1:7000")
	return f, fs.Parse(args)
}

func TestParse(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		want    Flags
		wantErr string // a substring of the error; empty: no error
	}{
		{name: "defaults", want: Flags{Addr: "127.0.0.1:7000"}},
		{name: "every flag", args: []string{"-addr", "[::1]:0", "-cores", "0-2,5", "-backend", "epoll", "-metrics", "127.0.0.1:9100"},
			want: Flags{Addr: "[::1]:0", Cores: []int{0, 1, 2, 5}, Backend: percore.Epoll, Metrics: "127.0.0.1:9100"}},
		{name: "uring", args: []string{"-backend", "uring"}, want: Flags{Addr: "127.0.0.1:7000", Backend: percore.IOURing}},
		{name: "io_uring as String spells it", args: []string{"-backend", "io_uring"}, want: Flags{Addr: "127.0.0.1:7000", Backend: percore.IOURing}},
		{name: "bad backend", args: []string{"-backend", "kqueue"}, wantErr: `invalid value "kqueue" for flag -backend: unknown backend "kqueue"`},
		{name: "bad cores", args: []string{"-cores", "0-x"}, wantErr: `invalid value "0-x" for flag -cores: cpu: bad cpu list "0-x"`},
		{name: "reversed range", args: []string{"-cores", "3-1"}, wantErr: `for flag -cores`},
		{name: "a cpu twice", args: []string{"-cores", "0,0"}, wantErr: `invalid value "0,0" for flag -cores: cpu: bad cpu list "0,0": element 2 "0": cpu 0 is listed twice`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := parse(t, tc.args...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Parse(%q) = %v, want an error with %q", tc.args, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.args, err)
			}
			if f.Addr != tc.want.Addr || !slices.Equal(f.Cores, tc.want.Cores) || f.Backend != tc.want.Backend || f.Metrics != tc.want.Metrics {
				t.Fatalf("Parse(%q) = %+v, want %+v", tc.args, *f, tc.want)
			}
		})
	}
}

// Apply copies -cores and -backend and leaves the address to the caller.
func TestApply(t *testing.T) {
	f, err := parse(t, "-addr", "127.0.0.1:1", "-cores", "1", "-backend", "epoll")
	if err != nil {
		t.Fatal(err)
	}
	cfg := percore.Config{Addr: "keep", IdleTimeout: 7}
	f.Apply(&cfg)
	if !slices.Equal(cfg.Cores, []int{1}) || cfg.Backend != percore.Epoll || cfg.Addr != "keep" || cfg.IdleTimeout != 7 {
		t.Fatalf("Apply gave %+v", cfg)
	}
}

// -uring-features parses percore.ParseUringFeatures' names into
// Config.UringFeatures, and leaves it nil (the default) when not given.
func TestUringFeatures(t *testing.T) {
	f, err := parse(t)
	if err != nil {
		t.Fatal(err)
	}
	var cfg percore.Config
	f.Apply(&cfg)
	if cfg.UringFeatures != nil {
		t.Fatalf("no -uring-features gave %v, want nil (the default)", *cfg.UringFeatures)
	}
	f, err = parse(t, "-uring-features", "skip_sends,napi")
	if err != nil {
		t.Fatal(err)
	}
	f.Apply(&cfg)
	if cfg.UringFeatures == nil || *cfg.UringFeatures != percore.UringSkipSends|percore.UringNAPI {
		t.Fatalf("-uring-features skip_sends,napi gave %v", cfg.UringFeatures)
	}
	if _, err := parse(t, "-uring-features", "sqpoll"); err == nil || !strings.Contains(err.Error(), `unknown io_uring feature "sqpoll"`) {
		t.Fatalf("-uring-features sqpoll: %v, want an unknown-feature error", err)
	}
}

// The defaults print as they parse, so that -h shows them.
func TestDefaultsInUsage(t *testing.T) {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	Register(fs, "127.0.0.1:7000")
	for name, want := range map[string]string{"addr": "127.0.0.1:7000", "cores": "", "backend": "auto", "metrics": "", "uring-features": "default"} {
		if got := fs.Lookup(name).DefValue; got != want {
			t.Errorf("-%s default %q, want %q", name, got, want)
		}
	}
}

func TestServeMetrics(t *testing.T) {
	cores, err := cpu.Cores()
	if err != nil {
		t.Fatal(err)
	}
	rt, err := percore.New(percore.Config{Cores: cores[:1], Backend: percore.Epoll}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })

	off, err := parse(t)
	if err != nil {
		t.Fatal(err)
	}
	if ms, err := off.ServeMetrics(rt); ms != nil || err != nil {
		t.Fatalf("ServeMetrics without -metrics = %v, %v; want nil, nil", ms, err)
	}

	on, err := parse(t, "-metrics", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ms, err := on.ServeMetrics(rt)
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	resp, err := http.Get("http://" + ms.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "percore_") {
		t.Fatalf("GET /metrics: %s, %d bytes without a percore_ series", resp.Status, len(body))
	}
}
