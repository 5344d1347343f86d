package runtime

import (
	"net"
	"os"
)

// closeReason is an error that says why the runtime closed a connection.
// Each matches, with errors.Is, itself and the std sentinel it refines.
type closeReason struct {
	msg string
	std error
}

func (e *closeReason) Error() string { return e.msg }
func (e *closeReason) Unwrap() error { return e.std }

// Why a connection was closed, as OnClose receives it (wrapped in a
// *net.OpError).
var (
	// ErrIdleTimeout: nothing was received for the idle timeout. It
	// matches os.ErrDeadlineExceeded.
	ErrIdleTimeout error = &closeReason{"idle timeout", os.ErrDeadlineExceeded}
	// ErrMaxLifetime: the connection reached its maximum lifetime. It
	// matches os.ErrDeadlineExceeded.
	ErrMaxLifetime error = &closeReason{"maximum connection lifetime reached", os.ErrDeadlineExceeded}
	// ErrSlowConsumer: the peer did not read and the queued bytes reached
	// MaxOutbound under the CloseSlowConsumer policy.
	ErrSlowConsumer error = &closeReason{"slow consumer: outbound queue over its cap", nil}
	// ErrShutdown: the runtime shut down (at Close, or at Shutdown's
	// deadline). It matches net.ErrClosed.
	ErrShutdown error = &closeReason{"runtime shut down", net.ErrClosed}
	// ErrHandlerPanic: the handler panicked while handling this
	// connection.
	ErrHandlerPanic error = &closeReason{"handler panicked", nil}
)
