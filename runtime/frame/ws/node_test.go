package ws_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/percore/percore/internal/wstest"
	"github.com/percore/percore/runtime/frame/ws"
)

// installNodeWS installs the npm ws package (major version 8) into dir
// and returns the NODE_PATH that finds it, or why it cannot.
func installNodeWS(dir string) (string, error) {
	if _, err := exec.LookPath("node"); err != nil {
		return "", fmt.Errorf("node is not installed: %v", err)
	}
	if _, err := exec.LookPath("npm"); err != nil {
		return "", fmt.Errorf("npm is not installed: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "install", "--prefix", dir, "--no-audit", "--no-fund", "--loglevel=error", "ws@8")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("npm install ws@8 failed (is its registry reachable?): %v: %s", err, out)
	}
	return filepath.Join(dir, "node_modules"), nil
}

// TestNode: interop with the npm ws package under node, both ways, with
// and without permessage-deflate. It skips, saying why, when node or npm
// is missing or npm cannot install ws.
func TestNode(t *testing.T) {
	path, err := installNodeWS(t.TempDir())
	if err != nil {
		t.Skipf("skipping the node ws interop: %v", err)
	}
	t.Run("client", func(t *testing.T) { nodeClient(t, path) })
	t.Run("server", func(t *testing.T) { nodeServer(t, path) })
}

func nodeCmd(t *testing.T, path string, args ...string) *exec.Cmd {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, "node", append([]string{"testdata/node_peer.js"}, args...)...)
	cmd.Env = append(os.Environ(), "NODE_PATH="+path)
	return cmd
}

// nodeClient: the npm ws client against the codec's server.
func nodeClient(t *testing.T, path string) {
	tests := []struct {
		name   string
		ours   ws.Deflate
		theirs string
	}{
		{"plain", ws.Deflate{}, "false"},
		{"deflate", ws.Deflate{Enabled: true}, "true"},
		{"deflate-takeover", ws.Deflate{Enabled: true, WriteContextTakeover: true, ReadContextTakeover: true}, `{"threshold":0}`},
		// Our compressor asked for a 512-byte window: node's zlib would
		// fail ("invalid distance too far back") on any longer reference.
		{"deflate-window9", ws.Deflate{Enabled: true, WriteContextTakeover: true}, `{"serverMaxWindowBits":9,"threshold":0}`},
		{"deflate-client-window10", ws.Deflate{Enabled: true, ReadContextTakeover: true, ReadWindowBits: 10}, `{"clientMaxWindowBits":true,"threshold":0}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			addr := wstest.EchoServer(t, ws.Config{Deflate: tc.ours})
			out, err := nodeCmd(t, path, "client", "ws://"+addr+"/", tc.theirs).CombinedOutput()
			if err != nil {
				t.Fatalf("node client: %v\n%s", err, out)
			}
		})
	}
}

// nodeServer: the codec's client against the npm ws server.
func nodeServer(t *testing.T, path string) {
	tests := []struct {
		name   string
		theirs string
		ours   ws.Deflate
		agreed bool
	}{
		{"plain", "false", ws.Deflate{Enabled: true}, false},
		{"deflate", `{"threshold":0}`, ws.Deflate{Enabled: true}, true},
		{"deflate-takeover", `{"threshold":0}`, ws.Deflate{Enabled: true, WriteContextTakeover: true, ReadContextTakeover: true}, true},
		{"deflate-window", `{"threshold":0,"clientMaxWindowBits":10}`, ws.Deflate{Enabled: true, WriteContextTakeover: true, ReadContextTakeover: true, ReadWindowBits: 11}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := nodeCmd(t, path, "server", tc.theirs)
			stdin, _ := cmd.StdinPipe()
			stdout, _ := cmd.StdoutPipe()
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				stdin.Close() // the server exits at the end of its input
				cmd.Wait()
			})
			port, err := bufio.NewReader(stdout).ReadString('\n')
			if err != nil {
				t.Fatalf("node server: %v", err)
			}
			cl := wstest.Dial(t, "127.0.0.1:"+strings.TrimSpace(port), "/", ws.Config{Deflate: tc.ours})
			wstest.Exercise(t, cl, tc.agreed)
		})
	}
}
