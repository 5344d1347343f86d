package resp_test

import (
	"bufio"
	"fmt"
	"strings"

	"github.com/percore/percore/runtime/frame/resp"
)

// ScanCommand is a bufio.SplitFunc: here over a bufio.Scanner, in a
// server over frame.Split.
func ExampleScanCommand() {
	in := "*2\r\n$3\r\nGET\r\n$1\r\nk\r\nSET k v\r\n*1\r\n*1\r\n"
	sc := bufio.NewScanner(strings.NewReader(in))
	sc.Split(resp.ScanCommand(resp.Limits{}))
	var args [][]byte
	for sc.Scan() {
		args = resp.Args(args[:0], sc.Bytes())
		fmt.Printf("%q\n", args)
	}
	fmt.Println(sc.Err())
	// Output:
	// ["GET" "k"]
	// ["SET" "k" "v"]
	// Protocol error: expected '$', got '*'
}

// Parse reads commands in place, as a frame.View handler does.
func ExampleParse() {
	in := []byte("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4\r\na\r\nb\r\n*1\r\n$4\r\nPI")
	var args [][]byte
	for {
		var n int
		var err error
		args, n, err = resp.Parse(args[:0], in, resp.Limits{})
		if err != nil || n == 0 {
			fmt.Printf("left: %q, %v\n", in, err)
			break
		}
		fmt.Printf("%q\n", args)
		in = in[n:]
	}
	reply := resp.AppendBulk(resp.AppendSimple(nil, "OK"), []byte("a\r\nb"))
	fmt.Printf("%q\n", reply)
	// Output:
	// ["SET" "k" "a\r\nb"]
	// left: "*1\r\n$4\r\nPI", <nil>
	// "+OK\r\n$4\r\na\r\nb\r\n"
}

// A Parser reads a command that arrives in pieces once, as a frame.View
// handler is shown it: what the last call left, followed by the new bytes.
func ExampleParser() {
	var p resp.Parser
	var held []byte // what View keeps between reads
	for _, read := range []string{"*2\r\n$4\r\nEC", "HO\r\n$5\r\nhel", "lo\r\n"} {
		held = append(held, read...)
		args, n, err := p.Parse(nil, held, resp.Limits{})
		if err != nil {
			panic(err)
		}
		if n == 0 {
			fmt.Println("partial, progress kept:", p.Partial())
			continue
		}
		fmt.Printf("%q\n", args)
		held = held[n:]
	}
	// Output:
	// partial, progress kept: true
	// partial, progress kept: true
	// ["ECHO" "hello"]
}
