package pctest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// PKI is a test certificate authority with a server and a client
// certificate, made once per test binary (ECDSA P-256). The server's
// names are "example.test" and 127.0.0.1.
type PKI struct {
	Pool   *x509.CertPool
	CA     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	Server tls.Certificate
	Other  tls.Certificate // a second server certificate, for "other.test" (SNI tests)
	Client tls.Certificate
}

var (
	pkiOnce sync.Once
	thePKI  PKI
)

// TestPKI returns the test binary's PKI.
func TestPKI() *PKI {
	pkiOnce.Do(func() {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			panic(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber:          big.NewInt(1),
			Subject:               pkix.Name{CommonName: "percore test CA"},
			NotBefore:             time.Now().Add(-time.Hour),
			NotAfter:              time.Now().Add(24 * time.Hour),
			IsCA:                  true,
			KeyUsage:              x509.KeyUsageCertSign,
			BasicConstraintsValid: true,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			panic(err)
		}
		ca, _ := x509.ParseCertificate(der)
		thePKI.CA, thePKI.caKey = ca, key
		thePKI.Pool = x509.NewCertPool()
		thePKI.Pool.AddCert(ca)
		thePKI.Server = thePKI.leaf(2, "example.test", x509.ExtKeyUsageServerAuth)
		thePKI.Client = thePKI.leaf(3, "client.test", x509.ExtKeyUsageClientAuth)
		thePKI.Other = thePKI.leaf(4, "other.test", x509.ExtKeyUsageServerAuth)
	})
	return &thePKI
}

func (p *PKI) leaf(serial int64, name string, usage x509.ExtKeyUsage) tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{name},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.CA, &key.PublicKey, p.caKey)
	if err != nil {
		panic(err)
	}
	c, _ := x509.ParseCertificate(der)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: c}
}

// ServerTLS is a server configuration with the PKI's server certificate,
// offering http/1.1 by ALPN.
func (p *PKI) ServerTLS() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{p.Server}, NextProtos: []string{"http/1.1"}}
}

// ClientTLS is a client configuration that trusts the PKI, for
// example.test.
func (p *PKI) ClientTLS() *tls.Config {
	return &tls.Config{RootCAs: p.Pool, ServerName: "example.test"}
}

// PEMFiles writes the CA certificate, the server's certificate and its key
// as PEM files into a test's temporary directory, for the tools that take
// files (openssl, curl, the examples' -tls-cert and -tls-key).
func (p *PKI) PEMFiles(t testing.TB) (ca, cert, key string) {
	t.Helper()
	dir := t.TempDir()
	kder, err := x509.MarshalPKCS8PrivateKey(p.Server.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, cert, key = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	for _, f := range []struct {
		path, kind string
		der        []byte
	}{{ca, "CERTIFICATE", p.CA.Raw}, {cert, "CERTIFICATE", p.Server.Certificate[0]}, {key, "PRIVATE KEY", kder}} {
		if err := os.WriteFile(f.path, pem.EncodeToMemory(&pem.Block{Type: f.kind, Bytes: f.der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return ca, cert, key
}
