package tlsconn

import (
	"bytes"
	"crypto/hkdf"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"os"
	"strings"
	"sync"
)

// What kernel TLS (kTLS) would need, and what of it this package has.
//
// With kTLS, after the handshake the record keys go to the kernel
// (setsockopt TCP_ULP "tls", then SOL_TLS TLS_TX and TLS_RX with a
// tls12_crypto_info_* holding key, IV, salt and the next record sequence
// number of each direction), and the loop sends and receives plaintext:
// SendFile stays zero-copy. crypto/tls does not export record keys. The
// one door it has is Config.KeyLogWriter, which receives each
// connection's traffic secrets as NSS key log lines, keyed by the client
// random (meant for debugging: whatever holds the writer holds the keys).
// From a TLS 1.3 secret, the keys are HKDF-Expand-Label of it
// (RFC 8446 section 7.3), which TrafficKeysTLS13 computes; a KeyUpdate is
// the next secret (NextTrafficSecret) handed to the kernel again. TLS 1.2
// logs only the master secret (CLIENT_RANDOM), from which the keys are the
// PRF's key block with both randoms: not written here.
//
// The rest is on paper only (docs/decisions/0033-tls-engine.md): the
// sequence numbers (crypto/tls's are unexported; a session would count
// the application records it handed over and took, and the server's
// session tickets sent with the handshake), the setsockopt calls, and
// post-handshake messages (a kTLS receive socket returns them as control
// messages that crypto/tls would no longer see). These machines have no
// "tls" ULP, so none of that can run here; KernelTLS says so.

// KernelTLS reports whether this kernel offers the tls upper-layer
// protocol (tls in /proc/sys/net/ipv4/tcp_available_ulp). The module may
// also load on first use; a false here with no error means it is not
// available now.
func KernelTLS() (bool, error) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_available_ulp")
	if err != nil {
		return false, fmt.Errorf("kernel tls: %w", err)
	}
	for _, ulp := range strings.Fields(string(b)) {
		if ulp == "tls" {
			return true, nil
		}
	}
	return false, nil
}

// TrafficKeys are one direction's record protection keys, as a kTLS
// crypto_info wants them: for AES-GCM, the kernel's salt is IV[:4] and its
// iv IV[4:]; for ChaCha20-Poly1305 the IV is whole.
type TrafficKeys struct {
	CipherSuite uint16
	Key, IV     []byte
}

// TrafficKeysTLS13 derives a TLS 1.3 traffic secret's key and IV
// (RFC 8446 section 7.3) for one of the three TLS 1.3 cipher suites.
func TrafficKeysTLS13(suite uint16, secret []byte) (TrafficKeys, error) {
	h, keyLen, err := suite13(suite)
	if err != nil {
		return TrafficKeys{}, err
	}
	key, err := expandLabel(h, secret, "key", keyLen)
	if err != nil {
		return TrafficKeys{}, err
	}
	iv, err := expandLabel(h, secret, "iv", 12)
	if err != nil {
		return TrafficKeys{}, err
	}
	return TrafficKeys{CipherSuite: suite, Key: key, IV: iv}, nil
}

// NextTrafficSecret is the secret after a KeyUpdate (RFC 8446 section
// 7.2).
func NextTrafficSecret(suite uint16, secret []byte) ([]byte, error) {
	h, _, err := suite13(suite)
	if err != nil {
		return nil, err
	}
	return expandLabel(h, secret, "traffic upd", h().Size())
}

func suite13(suite uint16) (func() hash.Hash, int, error) {
	switch suite {
	case tls.TLS_AES_128_GCM_SHA256:
		return sha256.New, 16, nil
	case tls.TLS_AES_256_GCM_SHA384:
		return sha512.New384, 32, nil
	case tls.TLS_CHACHA20_POLY1305_SHA256:
		return sha256.New, 32, nil
	}
	return nil, 0, fmt.Errorf("tlsconn: %s is not a TLS 1.3 cipher suite", tls.CipherSuiteName(suite))
}

// expandLabel is HKDF-Expand-Label with an empty context.
func expandLabel(h func() hash.Hash, secret []byte, label string, n int) ([]byte, error) {
	full := "tls13 " + label
	info := []byte{byte(n >> 8), byte(n), byte(len(full))}
	info = append(info, full...)
	info = append(info, 0) // context length
	return hkdf.Expand(h, secret, string(info), n)
}

// KeyLog is a tls.Config.KeyLogWriter that keeps the secrets crypto/tls
// logs, by client random, until Take collects them: the key extraction
// path a kTLS hand-over would use. It is safe for concurrent use (every
// handshake of a Config writes to it).
type KeyLog struct {
	mu sync.Mutex
	m  map[string]map[string][]byte
}

// Write takes one NSS key log line: LABEL CLIENT_RANDOM SECRET, in hex.
func (k *KeyLog) Write(line []byte) (int, error) {
	f := bytes.Fields(line)
	if len(f) != 3 {
		return 0, errors.New("tlsconn: not a key log line")
	}
	secret := make([]byte, hex.DecodedLen(len(f[2])))
	if _, err := hex.Decode(secret, f[2]); err != nil {
		return 0, fmt.Errorf("tlsconn: key log secret: %w", err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.m == nil {
		k.m = map[string]map[string][]byte{}
	}
	random := strings.ToLower(string(f[1]))
	if k.m[random] == nil {
		k.m[random] = map[string][]byte{}
	}
	k.m[random][string(f[0])] = secret
	return len(line), nil
}

// Take returns and forgets the secrets logged for a client random, by
// label (CLIENT_TRAFFIC_SECRET_0, SERVER_TRAFFIC_SECRET_0, CLIENT_RANDOM,
// ...).
func (k *KeyLog) Take(clientRandom []byte) map[string][]byte {
	k.mu.Lock()
	defer k.mu.Unlock()
	r := hex.EncodeToString(clientRandom)
	s := k.m[r]
	delete(k.m, r)
	return s
}
