//go:build linux

package serverflag

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"strings"

	percore "github.com/percore/percore/runtime"
)

// TLSFlags holds -tls-cert and -tls-key: a PEM certificate chain and its
// key. With both, the program serves TLS on its -addr.
type TLSFlags struct {
	Cert, Key string
}

// RegisterTLS defines -tls-cert and -tls-key on fs.
func RegisterTLS(fs *flag.FlagSet) *TLSFlags {
	f := &TLSFlags{}
	fs.StringVar(&f.Cert, "tls-cert", "", "serve TLS with this PEM certificate chain (with -tls-key)")
	fs.StringVar(&f.Key, "tls-key", "", "the PEM private key of -tls-cert")
	return f
}

// Apply, when both flags are set, loads the key pair into cfg.TLS
// (offering protos by ALPN, session tickets on, crypto/tls's defaults
// otherwise) and makes cfg.Addr a tls:// address. Without them it leaves
// cfg alone; with one of them it is an error.
func (f *TLSFlags) Apply(cfg *percore.Config, protos ...string) error {
	switch {
	case f.Cert == "" && f.Key == "":
		return nil
	case f.Cert == "" || f.Key == "":
		return errors.New("-tls-cert and -tls-key go together")
	}
	pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return fmt.Errorf("tls key pair: %w", err)
	}
	cfg.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, NextProtos: protos}
	if _, rest, ok := strings.Cut(cfg.Addr, "://"); ok {
		cfg.Addr = rest
	}
	cfg.Addr = "tls://" + cfg.Addr
	return nil
}
