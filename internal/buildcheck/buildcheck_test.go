package buildcheck

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// userMain is the throw-away module's program: an echo server on one loop
// (the default backend, Auto), one client round trip over loopback, and a
// shutdown. It prints the backend the runtime chose and "round trip ok".
const userMain = `package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/percore/percore/cpu"
	percore "github.com/percore/percore/runtime"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "user:", err)
		os.Exit(1)
	}
}

func run() error {
	cores, err := cpu.Cores()
	if err != nil {
		return err
	}
	rt, err := percore.New(percore.Config{Addr: "127.0.0.1:0", Cores: cores[:1]},
		percore.HandlerFunc(func(c *percore.Conn, data []byte) { c.Write(data) }))
	if err != nil {
		return err
	}
	defer rt.Close()
	fmt.Println("backend:", rt.Report().Backend)
	c, err := net.DialTimeout("tcp", rt.Addr().String(), 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	msg := []byte("hello from a module outside percore")
	if _, err := c.Write(msg); err != nil {
		return err
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		return err
	}
	if !bytes.Equal(got, msg) {
		return fmt.Errorf("echo returned %q, want %q", got, msg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rt.Shutdown(ctx); err != nil {
		return err
	}
	fmt.Println("round trip ok")
	return nil
}
`

// repoRoot returns the checkout's root: the directory of the go.mod above
// this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("no go.mod at the checkout's root %s: %v", dir, err)
	}
	return dir
}

// userEnv is the environment of the user's build: this one without any
// GOFLAGS, so that no link flag of ours (or of the developer's) leaks in.
// GOFLAGS=-mod=mod lets go record in the new module's go.mod and go.sum
// what it finds in the module cache: the build needs no network.
func userEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOFLAGS=") {
			env = append(env, kv)
		}
	}
	return append(env, "GOFLAGS=-mod=mod")
}

// TestUserModuleBuildsWithoutFlags builds a module in a temporary directory
// outside the checkout that requires percore through a replace directive,
// with `go build` and no -ldflags, and runs its echo round trip.
func TestUserModuleBuildsWithoutFlags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a separate module; not in -short mode")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command on PATH to build the user module with: %v", err)
	}
	root := repoRoot(t)
	dir := t.TempDir()
	if strings.HasPrefix(dir, root+string(filepath.Separator)) {
		t.Fatalf("the temporary directory %s is inside the checkout %s", dir, root)
	}
	goMod := "module example.com/percoreuser\n\ngo 1.26.0\n\n" +
		"require github.com/percore/percore v0.0.0-00010101000000-000000000000\n\n" +
		"replace github.com/percore/percore => " + root + "\n"
	// The checkout's go.sum holds every hash the build can need.
	goSum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"go.mod": []byte(goMod), "go.sum": goSum, "main.go": []byte(userMain)}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = dir
		cmd.Env = userEnv()
		cmd.WaitDelay = 5 * time.Second
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				t.Fatalf("%s %s did not finish within the test's deadline:\n%s", name, strings.Join(args, " "), out.String())
			}
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out.String())
		}
		return out.String()
	}

	if flags := strings.TrimSpace(run(goBin, "env", "GOFLAGS")); strings.Contains(flags, "ldflags") {
		t.Fatalf("the user build would run with GOFLAGS=%q", flags)
	}
	bin := filepath.Join(dir, "user")
	run(goBin, "build", "-o", bin, ".")
	out := run(bin)
	if !strings.Contains(out, "round trip ok") {
		t.Fatalf("the user program did not report its round trip:\n%s", out)
	}
	t.Logf("user module built with a plain go build and ran:\n%s", out)

	// What the user's module graph holds: the library's requirements, and
	// none of the benchmark module's (docs/decisions/0037).
	graph := run(goBin, "list", "-m", "all")
	var found []string
	for _, line := range strings.Split(graph, "\n") {
		path, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		for _, bench := range benchOnly {
			if path == bench || strings.HasPrefix(path, bench+"/") {
				found = append(found, path)
			}
		}
	}
	if len(found) > 0 {
		t.Fatalf("a user's module that imports percore pulls in %v, which only the benchmark module may require; go list -m all:\n%s", found, graph)
	}
	t.Logf("the user module's graph (go list -m all):\n%s", graph)
}

// benchOnly are the module paths (and their subpaths) that the peer
// servers, the load tools, the interop tests and the lint tools need, and
// that examples/bench's go.mod requires instead of the library's.
var benchOnly = []string{
	"github.com/panjf2000/gnet",
	"github.com/cloudwego/netpoll",
	"github.com/valyala/fasthttp",
	"github.com/gorilla/websocket",
	"github.com/lxzan/gws",
	"github.com/tsenart/vegeta",
	"honnef.co/go/tools",
}
