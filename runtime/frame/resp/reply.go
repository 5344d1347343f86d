package resp

import "strconv"

// The appenders write one reply each at the end of dst and return the
// extended slice, as strconv's do: build replies in a buffer of your own,
// or straight into a connection's outbound queue with percore.Conn.Reserve
// (size the room with BulkLen or MaxIntLen) and Commit.

// AppendSimple appends a simple string reply, "+s\r\n". s must not hold
// '\r' or '\n'.
func AppendSimple(dst []byte, s string) []byte {
	dst = append(dst, '+')
	dst = append(dst, s...)
	return append(dst, '\r', '\n')
}

// AppendError appends an error reply, "-msg\r\n": msg starts with the
// error's code ("ERR unknown command ..."). '\r' and '\n' in msg become
// spaces, as Redis makes them.
func AppendError(dst []byte, msg string) []byte {
	dst = append(dst, '-')
	for i := range len(msg) {
		c := msg[i]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		dst = append(dst, c)
	}
	return append(dst, '\r', '\n')
}

// AppendInt appends an integer reply, ":n\r\n".
func AppendInt(dst []byte, n int64) []byte {
	dst = append(dst, ':')
	dst = strconv.AppendInt(dst, n, 10)
	return append(dst, '\r', '\n')
}

// MaxIntLen is the longest integer reply AppendInt appends.
const MaxIntLen = 1 + 20 + 2

// AppendBulk appends a bulk string reply, "$len\r\nb\r\n".
func AppendBulk(dst, b []byte) []byte {
	dst = append(dst, '$')
	dst = strconv.AppendInt(dst, int64(len(b)), 10)
	dst = append(dst, '\r', '\n')
	dst = append(dst, b...)
	return append(dst, '\r', '\n')
}

// AppendBulkString is AppendBulk for a string.
func AppendBulkString(dst []byte, s string) []byte {
	dst = append(dst, '$')
	dst = strconv.AppendInt(dst, int64(len(s)), 10)
	dst = append(dst, '\r', '\n')
	dst = append(dst, s...)
	return append(dst, '\r', '\n')
}

// BulkLen returns the length of the bulk string reply of n bytes.
func BulkLen(n int) int {
	digits := 1
	for v := n; v >= 10; v /= 10 {
		digits++
	}
	return 1 + digits + 2 + n + 2
}

// AppendNull appends the null bulk string reply, "$-1\r\n" (GET of a
// missing key).
func AppendNull(dst []byte) []byte { return append(dst, "$-1\r\n"...) }

// AppendArray appends the header of an array reply of n elements,
// "*n\r\n"; append the elements after it.
func AppendArray(dst []byte, n int) []byte {
	dst = append(dst, '*')
	dst = strconv.AppendInt(dst, int64(n), 10)
	return append(dst, '\r', '\n')
}

// AppendCommand appends a command as an array of bulk strings, what a
// client sends.
func AppendCommand(dst []byte, args ...string) []byte {
	dst = AppendArray(dst, len(args))
	for _, a := range args {
		dst = AppendBulkString(dst, a)
	}
	return dst
}
