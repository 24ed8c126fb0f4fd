package app

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Names of the files in the webhook certificate directory: cert-manager's Secret keys, which the
// controller's own Secret uses too.
const (
	certFile = "tls.crt"
	keyFile  = "tls.key"
	caFile   = "ca.crt"
)

// errNoServingCert is what a TLS handshake gets while the certificate directory holds no key pair yet: the
// webhook server listens and waits for it instead of exiting (controller-runtime's own certificate watcher
// fails the server's start when the files are missing, which took the whole controller down).
var errNoServingCert = errors.New("no serving certificate yet")

// certFiles serves the key pair in dir, read again when the files change, so a rotated certificate (written
// by the controller itself or by the kubelet from cert-manager's Secret) is served without a restart.
type certFiles struct {
	dir string

	mu    sync.Mutex
	stamp string
	cert  *tls.Certificate
}

// GetCertificate is the webhook server's tls.Config.GetCertificate.
func (c *certFiles) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return c.current()
}

// current returns the key pair in dir, loading it when the files' sizes or modification times changed since
// the last load.
func (c *certFiles) current() (*tls.Certificate, error) {
	stamp, err := c.stampOf(certFile, keyFile)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w in %s", errNoServingCert, c.dir)
		}
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cert != nil && stamp == c.stamp {
		return c.cert, nil
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(c.dir, certFile), filepath.Join(c.dir, keyFile))
	if err != nil {
		// A half-written pair (one file renamed, not yet the other) is read again on the next handshake.
		return nil, fmt.Errorf("loading the serving certificate from %s: %w", c.dir, err)
	}
	if pair.Leaf == nil {
		if pair.Leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, err
		}
	}
	c.cert, c.stamp = &pair, stamp
	return c.cert, nil
}

func (c *certFiles) stampOf(names ...string) (string, error) {
	var b bytes.Buffer
	for _, n := range names {
		st, err := os.Stat(filepath.Join(c.dir, n))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%d/%d;", st.Size(), st.ModTime().UnixNano())
	}
	return b.String(), nil
}

// caBundle returns the PEM CA certificates of ca.crt that the serving certificate chains to: what the webhook
// configurations carry as caBundle.
func (c *certFiles) caBundle() ([]byte, error) {
	data, err := os.ReadFile(filepath.Join(c.dir, caFile))
	if err != nil {
		return nil, err
	}
	if !x509.NewCertPool().AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("%s in %s holds no PEM certificate", caFile, c.dir)
	}
	return data, nil
}

// write replaces the files of dir with data's, each by a rename so that a reader never sees half a file, and
// reports whether anything changed. The key goes first and the certificate last: a handshake between the two
// renames fails to load the pair and is retried, it never serves a mismatched pair.
func (c *certFiles) write(data map[string][]byte) (bool, error) {
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return false, err
	}
	changed := false
	for _, name := range []string{caFile, keyFile, certFile} {
		v, ok := data[name]
		if !ok {
			continue
		}
		path := filepath.Join(c.dir, name)
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, v) {
			continue
		}
		tmp, err := os.CreateTemp(c.dir, "."+name+"-*")
		if err != nil {
			return changed, err
		}
		_, werr := tmp.Write(v)
		cerr := tmp.Close()
		if err := errors.Join(werr, cerr); err != nil {
			_ = os.Remove(tmp.Name())
			return changed, err
		}
		if err := os.Rename(tmp.Name(), path); err != nil {
			_ = os.Remove(tmp.Name())
			return changed, err
		}
		changed = true
	}
	if changed {
		// Modification times have a coarse granularity on some filesystems; a new stamp must differ.
		now := time.Now()
		_ = os.Chtimes(filepath.Join(c.dir, certFile), now, now)
	}
	return changed, nil
}

// parsePEMCerts parses the CERTIFICATE blocks of data.
func parsePEMCerts(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return certs, nil
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, err
		}
		certs = append(certs, c)
	}
}
