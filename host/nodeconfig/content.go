// Package nodeconfig holds helpers over a rendered node configuration (abi.NodeConfig) that every encoder and
// the render pipeline share: decoding file contents, reading permissions, checking a configuration before it is
// encoded.
package nodeconfig

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"io"
	"strings"

	"github.com/osmhq/osm/sdk/abi"
)

// Encodings of inline file content, as upstream OSM and cloud-init's write_files name them.
const (
	EncodingPlain      = ""
	EncodingB64        = "b64"
	EncodingBase64     = "base64"
	EncodingGzip       = "gzip"
	EncodingGz         = "gz"
	EncodingGzipBase64 = "gzip+base64"
	EncodingGzBase64   = "gz+base64"
	EncodingGzipB64    = "gzip+b64"
	EncodingGzB64      = "gz+b64"
)

// maxDecodedSize bounds what a single file may expand to, so a gzip bomb in a profile cannot exhaust the
// controller's memory.
const maxDecodedSize = 64 << 20

// Decode returns the bytes a file's content stands for.
func Decode(c abi.FileContent) ([]byte, error) {
	if c.Inline == nil {
		return nil, nil
	}
	data := c.Inline.Data
	enc := strings.ToLower(strings.TrimSpace(c.Inline.Encoding))
	gzipped := strings.HasPrefix(enc, "gz")
	switch enc {
	case EncodingPlain:
		return []byte(data), nil
	case EncodingB64, EncodingBase64, EncodingGzipBase64, EncodingGzBase64, EncodingGzipB64, EncodingGzB64:
		raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(data))
		if err != nil {
			return nil, fmt.Errorf("content is not valid base64: %w", err)
		}
		if !gzipped {
			return raw, nil
		}
		return gunzip(raw)
	case EncodingGzip, EncodingGz:
		return gunzip([]byte(data))
	default:
		return nil, fmt.Errorf("unknown encoding %q (want one of b64, base64, gzip, gz, gzip+base64, gz+base64, gzip+b64, gz+b64, or none)", c.Inline.Encoding)
	}
}

func gunzip(data []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("content is not valid gzip: %w", err)
	}
	defer zr.Close()
	out, err := io.ReadAll(io.LimitReader(zr, maxDecodedSize+1))
	if err != nil {
		return nil, fmt.Errorf("content is not valid gzip: %w", err)
	}
	if len(out) > maxDecodedSize {
		return nil, fmt.Errorf("content expands to more than %d bytes", maxDecodedSize)
	}
	return out, nil
}

// DefaultPermissions are the permissions of a file that declares none (0644), as upstream OSM defines them.
const DefaultPermissions int32 = 644

// Mode converts permissions written as decimal digits read as octal (644) to mode bits (0o644).
func Mode(perm *int32) (int, error) {
	p := DefaultPermissions
	if perm != nil {
		p = *perm
	}
	if p < 0 || p > 7777 {
		return 0, fmt.Errorf("permissions %d out of range 0-7777", p)
	}
	mode := 0
	for shift, rest := 0, int(p); rest > 0; shift, rest = shift+3, rest/10 {
		digit := rest % 10
		if digit > 7 {
			return 0, fmt.Errorf("permissions %d: digit %d is not octal", p, digit)
		}
		mode |= digit << shift
	}
	return mode, nil
}

// OctalString renders permissions the way cloud-init's write_files wants them: "0644".
func OctalString(perm *int32) (string, error) {
	m, err := Mode(perm)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%#04o", m), nil
}
