//go:build linux

package main

import (
	"bufio"
	"encoding/binary"
	"hash/crc32"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/percore/percore/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// TestAcknowledgesDurableRecords runs the server in both modes, sends
// records from two connections, and checks the LSNs it answers and the
// records it wrote (the same format as examples/wal's).
func TestAcknowledgesDurableRecords(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "walstd")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, group := range []string{"true", "false"} {
		t.Run("group="+group, func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(bin, "-dir", dir, "-addr", "127.0.0.1:0", "-group="+group, "-prealloc", "0")
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { cmd.Process.Kill(); cmd.Wait() }()
			line, err := bufio.NewReader(stdout).ReadString('\n')
			m := regexp.MustCompile(`listening on (\S+)`).FindStringSubmatch(line)
			if err != nil || m == nil {
				t.Fatalf("first line %q, %v", line, err)
			}
			var conns []net.Conn
			for range 2 {
				c, err := net.DialTimeout("tcp", m[1], 5*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				c.SetDeadline(time.Now().Add(10 * time.Second))
				defer c.Close()
				conns = append(conns, c)
			}
			want := []string{"a", "bb", "ccc", "dddd"}
			for i, p := range want {
				c := conns[i%2]
				c.Write(binary.BigEndian.AppendUint32(nil, uint32(len(p))))
				c.Write([]byte(p))
				ack := make([]byte, 8)
				if _, err := io.ReadFull(c, ack); err != nil {
					t.Fatal(err)
				}
				if lsn := binary.BigEndian.Uint64(ack); lsn != uint64(i) {
					t.Errorf("record %d acknowledged with LSN %d", i, lsn)
				}
			}
			b, err := os.ReadFile(filepath.Join(dir, "wal-std.log"))
			if err != nil {
				t.Fatal(err)
			}
			table := crc32.MakeTable(crc32.Castagnoli)
			for i, p := range want {
				if len(b) < 8 {
					t.Fatalf("record %d missing", i)
				}
				n := binary.BigEndian.Uint32(b)
				crc := binary.BigEndian.Uint32(b[4:])
				got := b[8 : 8+n]
				if string(got) != p || crc32.Update(crc32.Checksum(b[:4], table), table, got) != crc {
					t.Errorf("record %d on disk: %q (crc ok %v), want %q", i, got, crc == crc32.Update(crc32.Checksum(b[:4], table), table, got), p)
				}
				b = b[8+n:]
			}
		})
	}
}
