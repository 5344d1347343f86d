package frame_test

import (
	"bufio"
	"fmt"
	"log/slog"
	"net"
	"time"

	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame"
)

// A line decoder delivers each complete line, whether it came in one read
// or several, and keeps the start of the next.
func ExampleLineDecoder() {
	d := frame.LineDecoder{MaxLine: 16}
	show := func(line []byte) bool { fmt.Printf("%q\n", line); return true }
	for _, read := range []string{"ping\r\necho he", "llo\nunfinish"} {
		if _, err := d.Feed([]byte(read), show); err != nil {
			fmt.Println(err)
		}
	}
	fmt.Println("held:", d.Buffered())
	_, err := d.Feed([]byte("ed, and much longer than the limit\n"), show)
	fmt.Println(err)
	// Output:
	// "ping"
	// "echo hello"
	// held: 8
	// frame too long: 42 bytes, limit 16
}

// A length decoder rejects a frame from its header alone.
func ExampleLengthDecoder() {
	d := frame.LengthDecoder{MaxFrame: 1024}
	stream := frame.AppendFrame(frame.AppendFrame(nil, []byte("hello")), []byte("world"))
	stream = append(stream, 0, 0x10, 0, 0) // a header declaring 1 MiB
	_, err := d.Feed(stream, func(payload []byte) bool {
		fmt.Printf("%s\n", payload)
		return true
	})
	fmt.Println(err)
	// Output:
	// hello
	// world
	// frame too long: 1048576 bytes, limit 1024
}

type shout struct{}

func (shout) OnFrame(c *percore.Conn, line []byte) {
	frame.WriteLine(c, append([]byte("you said: "), line...))
}

func (shout) OnFrameError(c *percore.Conn, err error) {
	c.Write([]byte("error: line too long\n"))
}

// A line server with a 64-byte limit.
func ExampleLines() {
	rt, err := percore.New(percore.Config{Addr: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler)},
		frame.Lines(shout{}, frame.LineConfig{MaxLine: 64}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close()

	c, err := net.Dial("tcp", rt.Addr().String())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "hello\n%0100d\n", 0)
	r := bufio.NewScanner(c)
	for r.Scan() {
		fmt.Println(r.Text())
	}
	// Output:
	// you said: hello
	// error: line too long
}

// A Splitter runs any bufio.SplitFunc over a stream that arrives in
// pieces; End calls it with atEOF set, for the last token.
func ExampleSplitter() {
	s := frame.Splitter{Split: bufio.ScanWords, MaxBuffered: 16}
	show := func(word []byte) bool { fmt.Printf("%q\n", word); return true }
	for _, read := range []string{"one tw", "o  thr", "ee"} {
		if _, err := s.Feed([]byte(read), show); err != nil {
			fmt.Println(err)
		}
	}
	fmt.Println("held:", s.Buffered())
	if err := s.End(show); err != nil {
		fmt.Println(err)
	}
	// Output:
	// "one"
	// "two"
	// held: 5
	// "three"
}

type words struct{}

func (words) OnFrame(c *percore.Conn, word []byte) {
	c.Write(append(append([]byte("word: "), word...), '\n'))
}

// A word server: bufio.ScanWords over each connection, the last word
// delivered when the client ends its stream.
func ExampleSplit() {
	rt, err := percore.New(percore.Config{Addr: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler)},
		frame.Split(bufio.ScanWords, words{}, frame.SplitConfig{MaxBuffered: 64}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close()

	c, err := net.Dial("tcp", rt.Addr().String())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprint(c, "hello  thread-per-core\nworld")
	c.(*net.TCPConn).CloseWrite()
	r := bufio.NewScanner(c)
	for r.Scan() {
		fmt.Println(r.Text())
	}
	// Output:
	// word: hello
	// word: thread-per-core
	// word: world
}
