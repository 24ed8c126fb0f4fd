package runtime

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Reason classifies why a plugin call or load failed. Reasons are stable strings, fit for metric labels and
// condition reasons.
type Reason string

const (
	// ReasonTimeout: the call ran past Config.Timeout and was interrupted. The instance is discarded.
	ReasonTimeout Reason = "Timeout"
	// ReasonCanceled: the caller's context ended before the call finished.
	ReasonCanceled Reason = "Canceled"
	// ReasonOutOfMemory: the guest hit the memory cap.
	ReasonOutOfMemory Reason = "OutOfMemory"
	// ReasonPanic: the guest's language runtime crashed (for Go: a panic the guest package could not recover,
	// such as one in a goroutine, or a fatal runtime error). Its stderr is attached.
	ReasonPanic Reason = "Panic"
	// ReasonTrap: the module trapped (unreachable, out-of-bounds access, exit) without a recognisable panic.
	ReasonTrap Reason = "Trap"
	// ReasonInvalidOutput: the guest returned something that is not the JSON the ABI requires, or metadata that
	// does not validate.
	ReasonInvalidOutput Reason = "InvalidOutput"
	// ReasonPluginError: the guest reported an error through the Extism error channel. Its message is meant
	// for the operator; the plugin itself is healthy.
	ReasonPluginError Reason = "PluginError"
	// ReasonABIMismatch: the module speaks another ABI major version. It is refused before any other call.
	ReasonABIMismatch Reason = "ABIMismatch"
	// ReasonMissingExport: the module lacks a required export, or the caller asked for an optional export the
	// plugin does not implement.
	ReasonMissingExport Reason = "MissingExport"
	// ReasonInvalidInput: the host could not encode the request (for example a raw JSON field that is not
	// JSON). The plugin was not called.
	ReasonInvalidInput Reason = "InvalidInput"
	// ReasonInvalidModule: the bytes are not a WebAssembly module this runtime can compile and instantiate.
	ReasonInvalidModule Reason = "InvalidModule"
	// ReasonClosed: the module or runtime was closed.
	ReasonClosed Reason = "Closed"
)

// Sentinels for errors.Is: errors.Is(err, runtime.ErrTimeout) holds for every *Error with ReasonTimeout.
var (
	ErrTimeout       = &Error{Reason: ReasonTimeout}
	ErrCanceled      = &Error{Reason: ReasonCanceled}
	ErrOutOfMemory   = &Error{Reason: ReasonOutOfMemory}
	ErrPanic         = &Error{Reason: ReasonPanic}
	ErrTrap          = &Error{Reason: ReasonTrap}
	ErrInvalidOutput = &Error{Reason: ReasonInvalidOutput}
	ErrPluginError   = &Error{Reason: ReasonPluginError}
	ErrABIMismatch   = &Error{Reason: ReasonABIMismatch}
	ErrMissingExport = &Error{Reason: ReasonMissingExport}
	ErrInvalidInput  = &Error{Reason: ReasonInvalidInput}
	ErrInvalidModule = &Error{Reason: ReasonInvalidModule}
	ErrClosed        = &Error{Reason: ReasonClosed}
)

// Error is a failed plugin load or call. Its message is one line that names the plugin, the module digest, the
// export and what went wrong, e.g.
//
//	plugin "ubuntu" (sha256:1234abcd5678…) osm_render: timed out after 5s
type Error struct {
	// Plugin is the name the module was loaded under.
	Plugin string
	// Digest is the module's "sha256:<hex>" digest.
	Digest string
	// Export is the ABI function that failed; empty when loading failed before any call.
	Export string
	// Reason classifies the failure.
	Reason Reason
	// Detail says what happened, in one line.
	Detail string
	// Stderr is what the guest wrote to stderr and stdout during the call (bounded by Config.MaxOutputBytes).
	Stderr string
	// Err is the underlying error, if any (context.DeadlineExceeded for timeouts).
	Err error
}

// maxStderrInMessage bounds the guest output quoted in Error(): enough for a Go panic's first lines.
const maxStderrInMessage = 300

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "plugin %q", e.Plugin)
	if e.Digest != "" {
		fmt.Fprintf(&b, " (%s)", ShortDigest(e.Digest))
	}
	if e.Export != "" {
		b.WriteString(" " + e.Export)
	}
	b.WriteString(": ")
	if e.Detail != "" {
		b.WriteString(oneLine(e.Detail, 0))
	} else {
		b.WriteString(string(e.Reason))
	}
	if e.Stderr != "" && e.Reason != ReasonPluginError {
		b.WriteString("; guest output: ")
		b.WriteString(oneLine(e.Stderr, maxStderrInMessage))
	}
	return b.String()
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is an *Error with the same Reason whose other identifying fields are empty or
// equal, so the sentinels (ErrTimeout, ...) match any plugin.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok {
		return false
	}
	return t.Reason == e.Reason &&
		(t.Plugin == "" || t.Plugin == e.Plugin) &&
		(t.Digest == "" || t.Digest == e.Digest) &&
		(t.Export == "" || t.Export == e.Export)
}

// ReasonOf returns the Reason of the first *Error in err's chain, or "" when there is none.
func ReasonOf(err error) Reason {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

// ShortDigest abbreviates "sha256:<64 hex>" to "sha256:<12 hex>…" for messages.
func ShortDigest(d string) string {
	const keep = len("sha256:") + 12
	if len(d) <= keep {
		return d
	}
	return d[:keep] + "…"
}

// oneLine joins the lines of s with " | " and, if max > 0, cuts it to max bytes (on a rune boundary).
func oneLine(s string, max int) string {
	fields := strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' })
	for i := range fields {
		fields[i] = strings.TrimSpace(fields[i])
	}
	out := strings.Join(nonEmpty(fields), " | ")
	if max > 0 && len(out) > max {
		cut := max
		for cut > 0 && !utf8Start(out[cut]) {
			cut--
		}
		out = out[:cut] + "…"
	}
	return out
}

func nonEmpty(ss []string) []string {
	out := ss[:0]
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// fmtDuration prints a timeout the way an operator writes it in a flag ("5s", "750ms").
func fmtDuration(d time.Duration) string { return d.String() }
