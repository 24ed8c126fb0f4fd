// Package nodeconfig holds helpers over a rendered node configuration (abi.NodeConfig) that every encoder and
// the render pipeline share: file encodings, permissions, and a structural check before encoding.
package nodeconfig

import (
	"fmt"
	"strings"
)

// Encodings a file may ask for. As in upstream OSM, a file's inline data is always its plain content; the
// encoding only says how the content travels inside cloud-config user-data (base64 keeps scripts with odd
// characters intact; gzip makes large files smaller). Ignition ignores it and picks its own transport.
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

// Transport is how an encoding asks for content to be written.
type Transport int

const (
	// TransportPlain writes the content as text.
	TransportPlain Transport = iota
	// TransportBase64 writes the content base64-encoded.
	TransportBase64
	// TransportGzip writes the content gzipped, then base64-encoded.
	TransportGzip
)

// ParseEncoding maps an encoding name to its transport.
func ParseEncoding(enc string) (Transport, error) {
	switch strings.ToLower(strings.TrimSpace(enc)) {
	case EncodingPlain:
		return TransportPlain, nil
	case EncodingB64, EncodingBase64:
		return TransportBase64, nil
	case EncodingGzip, EncodingGz, EncodingGzipBase64, EncodingGzBase64, EncodingGzipB64, EncodingGzB64:
		return TransportGzip, nil
	default:
		return 0, fmt.Errorf("unknown encoding %q (want one of b64, base64, gzip, gz, gzip+base64, gz+base64, gzip+b64, gz+b64, or none)", enc)
	}
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
