//go:build linux

package runtime

import (
	"errors"
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
	// ErrWriteTimeout: queued bytes made no progress (the kernel took
	// none of them) for Config.WriteTimeout. It matches
	// os.ErrDeadlineExceeded.
	ErrWriteTimeout error = &closeReason{"write timeout: queued bytes made no progress", os.ErrDeadlineExceeded}
	// ErrLingerTimeout: a connection closed with bytes still queued did
	// not send them within Config.Linger, and was aborted. It matches
	// os.ErrDeadlineExceeded.
	ErrLingerTimeout error = &closeReason{"linger timeout: queued bytes not sent before close", os.ErrDeadlineExceeded}
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

// ErrLoopBusy is returned (wrapped) by Loop.Post when the loop's queue of
// posted functions is at Config.MaxPosted, and by Loop.Go when
// Config.MaxGo goroutines are running for the loop; a cross-loop call's
// done function gets it when its caller holds Config.MaxHeldCalls calls
// for a target that is behind. The loop is overloaded, and the caller
// should shed the work or retry later.
var ErrLoopBusy = errors.New("percore: loop busy")
