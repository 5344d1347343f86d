package listener

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// staleSocket leaves a socket file at path that nothing is bound to, as a
// crashed server does.
func staleSocket(t *testing.T, path string) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 1); err != nil {
		t.Fatal(err)
	}
}

func TestUnixExistingPath(t *testing.T) {
	tests := []struct {
		name string
		// setup puts something at path and returns a check that it is
		// still there and intact afterwards (nil when it should be gone).
		setup func(t *testing.T, path string) func(t *testing.T)
		want  string // part of the error; "" means Listen succeeds
	}{
		{"nothing there", func(*testing.T, string) func(*testing.T) { return nil }, ""},
		{"stale socket removed", func(t *testing.T, path string) func(*testing.T) {
			staleSocket(t, path)
			return nil
		}, ""},
		{"live stream socket", func(t *testing.T, path string) func(*testing.T) {
			ln, err := net.Listen("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ln.Close() })
			return func(t *testing.T) {
				c := dial(t, "unix", path)
				c.Close()
			}
		}, "bind: address already in use (another socket is bound to the path)"},
		{"live datagram socket", func(t *testing.T, path string) func(*testing.T) {
			pc, err := net.ListenPacket("unixgram", path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { pc.Close() })
			return func(t *testing.T) {
				if fi, err := os.Lstat(path); err != nil || fi.Mode().Type() != os.ModeSocket {
					t.Errorf("datagram socket file: %v, %v", fi, err)
				}
			}
		}, "bind: address already in use (another socket is bound to the path)"},
		{"regular file", func(t *testing.T, path string) func(*testing.T) {
			if err := os.WriteFile(path, []byte("keep me"), 0o600); err != nil {
				t.Fatal(err)
			}
			return func(t *testing.T) {
				if data, err := os.ReadFile(path); err != nil || string(data) != "keep me" {
					t.Errorf("regular file after Listen: %q, %v", data, err)
				}
			}
		}, "bind: address already in use (the path exists and is a regular file, not a socket)"},
		{"directory", func(t *testing.T, path string) func(*testing.T) {
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
			return func(t *testing.T) {
				if fi, err := os.Stat(path); err != nil || !fi.IsDir() {
					t.Errorf("directory after Listen: %v, %v", fi, err)
				}
			}
		}, "(the path exists and is a directory, not a socket)"},
		{"symbolic link to a stale socket", func(t *testing.T, path string) func(*testing.T) {
			target := path + ".target"
			staleSocket(t, target)
			if err := os.Symlink(target, path); err != nil {
				t.Fatal(err)
			}
			return func(t *testing.T) {
				if got, err := os.Readlink(path); err != nil || got != target {
					t.Errorf("symbolic link after Listen: %q, %v", got, err)
				}
			}
		}, "(the path exists and is a symbolic link, not a socket)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(sockDir(t), "s")
			check := tt.setup(t, path)
			l, err := Listen("unix", path, Config{})
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Listen: %v", err)
				}
				defer l.Close()
				if a := l.Addr().(*net.UnixAddr); a.Name != path {
					t.Errorf("Addr() = %v, want %s", a, path)
				}
				c := dial(t, "unix", path)
				c.Close()
				acceptAll(t, []int{l.Fd()}, 1)
				return
			}
			if err == nil {
				l.Close()
				t.Fatal("Listen succeeded")
			}
			if !errors.Is(err, syscall.EADDRINUSE) {
				t.Errorf("error %v, want EADDRINUSE", err)
			}
			var oe *net.OpError
			if !errors.As(err, &oe) || oe.Op != "listen" || oe.Net != "unix" {
				t.Errorf("error %#v is not a *net.OpError{Op: listen, Net: unix}", err)
			}
			if !strings.HasPrefix(err.Error(), "listen unix "+path+": ") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q, want it to name %s and %q", err, path, tt.want)
			}
			check(t)
		})
	}
}

func TestUnixAbstract(t *testing.T) {
	// Abstract names are shared by every process in the network
	// namespace: the process ID keeps concurrent runs apart.
	name := fmt.Sprintf("@percore-listener-test-%d", os.Getpid())
	l := mustListen(t, "unix", name, Config{})
	if got := l.Addr().String(); got != name {
		t.Errorf("Addr() = %q, want %q", got, name)
	}
	c := dial(t, "unix", name)
	c.Close()
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func TestUnixNameTooLong(t *testing.T) {
	tests := []struct {
		name string
		path string
		want string
	}{
		{"path", "/" + strings.Repeat("x", 107), "the name is 108 bytes, more than the 107 a unix socket address holds"},
		{"abstract", "@" + strings.Repeat("x", 108), "the name is 109 bytes, more than the 108 a unix socket address holds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := Listen("unix", tt.path, Config{})
			if err == nil {
				l.Close()
				t.Fatal("Listen succeeded")
			}
			if want := "listen unix " + tt.path + ": " + tt.want; err.Error() != want {
				t.Errorf("error %q, want %q", err, want)
			}
		})
	}
}

// sockDir returns a short new directory for Unix socket paths, which the
// kernel limits to 107 bytes: t.TempDir's paths grow with the test's name
// and with TMPDIR.
func sockDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func TestUnixLongestName(t *testing.T) {
	dir := sockDir(t)
	path := dir + "/" + strings.Repeat("x", 107-len(dir)-1)
	if len(path) != 107 {
		t.Skipf("temporary directory %s is too long for this test", dir)
	}
	l := mustListen(t, "unix", path, Config{})
	c := dial(t, "unix", path)
	c.Close()
	l.Close()
}
