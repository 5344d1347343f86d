package tlsconn

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"reflect"
	"strings"
)

var (
	// ErrPoolFull is the handshake error of a session the pool could not
	// take: MaxHandshakes were running and MaxQueued waiting.
	ErrPoolFull = errors.New("tlsconn: handshake pool full")

	// ErrPoolClosed is the handshake error of a session whose pool was
	// closed before its handshake finished.
	ErrPoolClosed = errors.New("tlsconn: handshake pool closed")

	// ErrHandshakeIncomplete is returned by Encrypt and CloseNotify before
	// the loop has seen the handshake finish (HandshakeDone).
	ErrHandshakeIncomplete = errors.New("tlsconn: handshake not complete")

	// ErrClosed is returned by a session's methods after Close.
	ErrClosed = net.ErrClosed
)

// Error is a TLS failure of a session: what it was doing, the alert that
// went with it (sent to the peer, or received from it) and crypto/tls's
// error. Callers branch with errors.As; errors.Is sees through to Err
// (os.ErrDeadlineExceeded for a handshake timeout, ErrPoolFull, ...). The
// clean end of the peer's stream (close_notify) is io.EOF, unwrapped.
type Error struct {
	Op       string         // "handshake", "read" or "write"
	Alert    tls.AlertError // the alert, when Sent or Received is true
	Sent     bool           // this side sent Alert to the peer
	Received bool           // the peer sent Alert
	Err      error
}

func (e *Error) Error() string { return "tlsconn: " + e.Op + ": " + e.Err.Error() }

func (e *Error) Unwrap() error { return e.Err }

// AlertName returns the alert's name as RFC 8446 spells it (bad_record_mac),
// or "" when no alert went either way.
func (e *Error) AlertName() string {
	if !e.Sent && !e.Received {
		return ""
	}
	return strings.ReplaceAll(strings.TrimPrefix(e.Alert.Error(), "tls: "), " ", "_")
}

// wrapError turns crypto/tls's error into an *Error, finding the alert. A
// sent alert is a *net.OpError "local error" around crypto/tls's unexported
// alert type (a uint8), a received one the same with "remote error";
// a failed verification of the peer's certificate a
// tls.CertificateVerificationError, after bad_certificate;
// record-header failures are a tls.RecordHeaderError whose Conn is nil when
// an alert was sent (its doc says so) and whose message says which.
func wrapError(op string, err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	e = &Error{Op: op, Err: err}
	var oe *net.OpError
	var rh tls.RecordHeaderError
	switch {
	case errors.As(err, &oe) && (oe.Op == "local error" || oe.Op == "remote error"):
		if a, ok := alertCode(oe.Err); ok {
			e.Alert = a
			e.Sent = oe.Op == "local error"
			e.Received = !e.Sent
		}
	case errors.As(err, new(*tls.CertificateVerificationError)):
		// crypto/tls sends bad_certificate before it returns this.
		e.Sent, e.Alert = true, alertBadCertificate
	case errors.As(err, &rh) && rh.Conn == nil:
		e.Sent = true
		e.Alert = alertProtocolVersion
		if strings.Contains(rh.Msg, "oversized") {
			e.Alert = alertRecordOverflow
		}
	}
	return e
}

const (
	alertBadCertificate  tls.AlertError = 42
	alertRecordOverflow  tls.AlertError = 22
	alertProtocolVersion tls.AlertError = 70
)

// alertCode reads crypto/tls's alert out of an error: its type is
// unexported, a uint8 declared in crypto/tls.
func alertCode(err error) (tls.AlertError, bool) {
	if a, ok := err.(tls.AlertError); ok {
		return a, true
	}
	v := reflect.ValueOf(err)
	if v.Kind() != reflect.Uint8 || v.Type().PkgPath() != "crypto/tls" {
		return 0, false
	}
	return tls.AlertError(v.Uint()), true
}
