package tlsconn

// The record layer facts the transport needs to cut the peer's stream into
// whole records before crypto/tls sees them (RFC 8446 section 5.1, RFC 5246
// section 6.2). The constants are crypto/tls's own (common.go).
const (
	headerLen = 5

	// MaxPlaintext is the largest plaintext one record carries (2^14).
	MaxPlaintext = 16384

	// maxCiphertext is the largest record body TLS 1.2 allows (2^14+2048);
	// maxCiphertextTLS13 the largest TLS 1.3 allows (2^14+256). crypto/tls
	// sends record_overflow past them, on the header alone.
	maxCiphertext      = 16384 + 2048
	maxCiphertextTLS13 = 16384 + 256

	// MaxRecord is the most ciphertext a session holds for one partial
	// record: a header and the largest body any version allows.
	MaxRecord = headerLen + maxCiphertext

	recordTypeAlert     = 21
	recordTypeHandshake = 22
)

// recordLen returns how many bytes of in make its first record whole, or 0
// when in does not hold one yet. When the header alone is enough for
// crypto/tls to refuse the record, it returns the header's length and
// early=true, so that crypto/tls sees the header at once, sends its alert and
// fails, instead of the session waiting for a body that may never come (an
// HTTP request sent to a TLS port is not 8 KB of "record"). The cases are
// exactly the ones crypto/tls checks before it reads a body
// (Conn.readRecordOrCCS): a first record that is neither a handshake nor an
// alert, or whose version is 0x1000 or more; a record version other than
// expect, once the version is known (expect 0 before); a body longer than
// limit.
func recordLen(in []byte, first bool, expect uint16, limit int) (n int, early bool) {
	if len(in) < headerLen {
		return 0, false
	}
	typ := in[0]
	vers := uint16(in[1])<<8 | uint16(in[2])
	body := int(in[3])<<8 | int(in[4])
	switch {
	case first && ((typ != recordTypeAlert && typ != recordTypeHandshake) || vers >= 0x1000):
		return headerLen, true
	case expect != 0 && vers != expect:
		return headerLen, true
	case body > limit:
		return headerLen, true
	case len(in) < headerLen+body:
		return 0, false
	}
	return headerLen + body, false
}
