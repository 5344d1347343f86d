//go:build linux

package pctest

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// NginxServer is a real nginx a test started on a free loopback port, in
// the foreground (no daemon, no master process), with every file it writes
// in a temporary directory.
type NginxServer struct {
	dir  string
	addr string
	cmd  *exec.Cmd
}

// StartNginx starts nginx with server (the directives inside its one
// server block, after listen) and waits until it listens; it skips t when
// nginx is not installed, and kills it when t ends.
func StartNginx(t *testing.T, server string) *NginxServer {
	t.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		bin = "/usr/sbin/nginx" // Debian's, not on every PATH
		if _, serr := os.Stat(bin); serr != nil {
			t.Skip("nginx is not installed (Debian: apt-get install nginx-light; scripts/ensure-tools.sh installs it)")
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	conf := "daemon off;\nmaster_process off;\nworker_processes 1;\n" +
		"error_log " + filepath.Join(dir, "error.log") + " info;\npid " + filepath.Join(dir, "nginx.pid") + ";\n" +
		"events { worker_connections 256; }\n" +
		"http {\n  access_log " + filepath.Join(dir, "access.log") + ";\n" +
		"  client_body_temp_path " + filepath.Join(dir, "body") + ";\n" +
		"  proxy_temp_path " + filepath.Join(dir, "proxy") + ";\n" +
		"  server {\n    listen " + addr + ";\n" + server + "\n  }\n}\n"
	name := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(name, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	n := &NginxServer{dir: dir, addr: addr}
	n.cmd = exec.Command(bin, "-p", dir, "-c", name, "-e", filepath.Join(dir, "error.log"))
	if out, err := exec.Command(bin, "-t", "-p", dir, "-c", name, "-e", filepath.Join(dir, "error.log")).CombinedOutput(); err != nil {
		t.Fatalf("nginx -t: %v\n%s", err, out)
	}
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Kill)
	WaitFor(t, "nginx to listen on "+addr, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return n
}

// Addr returns the server's host:port.
func (n *NginxServer) Addr() string { return n.addr }

// AccessLog returns what nginx logged of the requests it served.
func (n *NginxServer) AccessLog(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(n.dir, "access.log"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

// Kill kills nginx and waits for it to exit.
func (n *NginxServer) Kill() {
	if n.cmd == nil || n.cmd.Process == nil {
		return
	}
	n.cmd.Process.Kill()
	n.cmd.Wait()
	n.cmd = nil
}
