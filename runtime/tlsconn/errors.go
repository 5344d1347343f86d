package tlsconn

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"reflect"
	"strconv"
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

// AlertName returns the alert's name as RFC 8446 spells it
// (bad_record_mac), or "" when no alert went either way.
func (e *Error) AlertName() string {
	if !e.Sent && !e.Received {
		return ""
	}
	if name, ok := alertNames[uint8(e.Alert)]; ok {
		return name
	}
	return "alert_" + strconv.Itoa(int(e.Alert))
}

// alertNames are RFC 8446's (section 6) and RFC 5246's alert names.
var alertNames = map[uint8]string{
	0: "close_notify", 10: "unexpected_message", 20: "bad_record_mac",
	21: "decryption_failed", 22: "record_overflow", 30: "decompression_failure",
	40: "handshake_failure", 42: "bad_certificate", 43: "unsupported_certificate",
	44: "certificate_revoked", 45: "certificate_expired", 46: "certificate_unknown",
	47: "illegal_parameter", 48: "unknown_ca", 49: "access_denied", 50: "decode_error",
	51: "decrypt_error", 60: "export_restriction", 70: "protocol_version",
	71: "insufficient_security", 80: "internal_error", 86: "inappropriate_fallback",
	90: "user_canceled", 100: "no_renegotiation", 109: "missing_extension",
	110: "unsupported_extension", 111: "certificate_unobtainable", 112: "unrecognized_name",
	113: "bad_certificate_status_response", 114: "bad_certificate_hash_value",
	115: "unknown_psk_identity", 116: "certificate_required", 120: "no_application_protocol",
	121: "ech_required",
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
