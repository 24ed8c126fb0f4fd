package pluginhost

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/osmhq/osm/sdk/runtime"
)

// The wire between the controller and its plugin host is a pipe pair carrying frames: an 8-byte prefix (the
// lengths of a JSON header and of a raw payload, big-endian uint32 each), the header, then the payload. The
// payload is the ABI's own JSON (a request or a response of sdk/abi) or a module's bytes, passed through
// untouched, so the process boundary adds no format of its own and no re-encoding of the plugin's data.

// Operations, from the controller to the host.
const (
	opLoad   = "load"   // payload: the module; reply: its metadata and exports
	opCall   = "call"   // payload: the export's input; reply payload: its output
	opUnload = "unload" // forget a module
)

// Messages from the host to the controller.
const (
	opReady = "ready"
	opReply = "reply"
	opEvent = "event"
)

// maxHeader bounds a header; maxPayload a payload (a module is at most 32 MiB, a call's input and output 4 MiB).
// Both sides check both: a writer refuses a frame past them (errFrameTooLarge) and the operation fails with
// its reason at once; a reader that gets one anyway stops reading, and the supervisor kills the host.
// maxErrorText bounds each text of an error that crosses the wire (its detail, the guest's stderr): a module
// decides what they quote (a compile error quotes its export names, a plugin error its own input).
const (
	maxHeader    = 1 << 20
	maxPayload   = 64 << 20
	maxErrorText = 16 << 10
)

// errFrameTooLarge is what frameWriter.write returns for a frame past maxHeader or maxPayload.
var errFrameTooLarge = errors.New("frame exceeds the wire's bound")

// header is a frame's JSON header. One type for every message keeps the codec trivial.
type header struct {
	ID     uint64 `json:"id,omitempty"`
	Op     string `json:"op"`
	Digest string `json:"digest,omitempty"`
	Name   string `json:"name,omitempty"`
	Export string `json:"export,omitempty"`
	// File, in a load request without payload, is where the host reads the module from.
	File *File `json:"file,omitempty"`
	// Err is a failed operation's error.
	Err *wireError `json:"err,omitempty"`
	// Load replies.
	Metadata json.RawMessage `json:"metadata,omitempty"`
	Exports  []string        `json:"exports,omitempty"`
	// Event is a runtime hook event.
	Event *wireEvent `json:"event,omitempty"`
	// Plugin and Seconds, in a successful call's reply, stand for its runtime.CallEvent.
	Plugin  string  `json:"plugin,omitempty"`
	Seconds float64 `json:"seconds,omitempty"`
}

// wireError carries a *runtime.Error across the boundary.
type wireError struct {
	Plugin string         `json:"plugin,omitempty"`
	Digest string         `json:"digest,omitempty"`
	Export string         `json:"export,omitempty"`
	Reason runtime.Reason `json:"reason"`
	Detail string         `json:"detail"`
	Stderr string         `json:"stderr,omitempty"`
}

func toWire(err error) *wireError {
	if err == nil {
		return nil
	}
	var re *runtime.Error
	if errors.As(err, &re) {
		return &wireError{Plugin: truncate(re.Plugin, 512), Digest: truncate(re.Digest, 512), Export: truncate(re.Export, 512),
			Reason: re.Reason, Detail: truncate(re.Detail, maxErrorText), Stderr: truncate(re.Stderr, maxErrorText)}
	}
	return &wireError{Reason: runtime.ReasonInvalidModule, Detail: truncate(err.Error(), maxErrorText)}
}

func (w *wireError) err() error {
	if w == nil {
		return nil
	}
	return w.runtimeError()
}

func (w *wireError) runtimeError() *runtime.Error {
	return &runtime.Error{Plugin: w.Plugin, Digest: w.Digest, Export: w.Export, Reason: w.Reason, Detail: w.Detail, Stderr: w.Stderr}
}

// wireEvent is one runtime.Hooks callback.
type wireEvent struct {
	Kind string `json:"kind"` // compiled, cacheHit, called, output, initializing, initialized
	// compiled, called, output; Digest also initializing, initialized
	Plugin string `json:"plugin,omitempty"`
	Digest string `json:"digest,omitempty"`
	// called, output
	Export string `json:"export,omitempty"`
	// compiled, called
	Seconds float64    `json:"seconds,omitempty"`
	Err     *wireError `json:"err,omitempty"`
	// compiled, cacheHit
	Layer          runtime.CacheLayer `json:"layer,omitempty"`
	NotSnapshotted string             `json:"notSnapshotted,omitempty"`
	// called
	Memory uint64 `json:"memory,omitempty"`
	// output
	Stream    string `json:"stream,omitempty"`
	Text      string `json:"text,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
}

// dispatch calls the hook e stands for.
func (e *wireEvent) dispatch(h runtime.Hooks) {
	d := time.Duration(e.Seconds * float64(time.Second))
	switch e.Kind {
	case "compiled":
		if h.Compiled != nil {
			h.Compiled(runtime.CompileEvent{Plugin: e.Plugin, Digest: e.Digest, Duration: d, Layer: e.Layer, NotSnapshotted: e.NotSnapshotted, Err: e.Err.err()})
		}
	case "cacheHit":
		if h.CacheHit != nil {
			h.CacheHit(e.Layer)
		}
	case "called":
		if h.Called != nil {
			ev := runtime.CallEvent{Plugin: e.Plugin, Digest: e.Digest, Export: e.Export, Duration: d, Memory: e.Memory}
			if e.Err != nil {
				ev.Err = e.Err.runtimeError()
			}
			h.Called(ev)
		}
	case "output":
		if h.Output != nil {
			h.Output(runtime.OutputEvent{Plugin: e.Plugin, Digest: e.Digest, Export: e.Export, Stream: e.Stream, Text: e.Text, Truncated: e.Truncated})
		}
	}
}

// frameWriter writes frames from many goroutines.
type frameWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (fw *frameWriter) write(h *header, payload []byte) error {
	hb, err := json.Marshal(h)
	if err != nil {
		return err
	}
	if len(hb) > maxHeader || len(payload) > maxPayload {
		return fmt.Errorf("%w: a header of %d bytes (at most %d) and a payload of %d (at most %d)", errFrameTooLarge, len(hb), maxHeader, len(payload), maxPayload)
	}
	// One write per frame up to a megabyte (a call's request or response): each write is a system call and
	// a wake-up on the other side. Modules go in two.
	inline := len(payload) <= 1<<20
	n := 8 + len(hb)
	if inline {
		n += len(payload)
	}
	buf := make([]byte, 8, n)
	binary.BigEndian.PutUint32(buf[:4], uint32(len(hb)))
	binary.BigEndian.PutUint32(buf[4:], uint32(len(payload)))
	buf = append(buf, hb...)
	if inline {
		buf = append(buf, payload...)
	}
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if _, err := fw.w.Write(buf); err != nil {
		return err
	}
	if !inline {
		_, err = fw.w.Write(payload)
	}
	return err
}

// frameReader reads frames from one goroutine.
type frameReader struct {
	r *bufio.Reader
}

func newFrameReader(r io.Reader) *frameReader { return &frameReader{r: bufio.NewReaderSize(r, 64<<10)} }

func (fr *frameReader) read() (*header, []byte, error) {
	var prefix [8]byte
	if _, err := io.ReadFull(fr.r, prefix[:]); err != nil {
		return nil, nil, err
	}
	hl, pl := binary.BigEndian.Uint32(prefix[:4]), binary.BigEndian.Uint32(prefix[4:])
	if hl > maxHeader || pl > maxPayload {
		return nil, nil, fmt.Errorf("frame of %d+%d bytes exceeds the limits", hl, pl)
	}
	buf := make([]byte, int(hl)+int(pl))
	if _, err := io.ReadFull(fr.r, buf); err != nil {
		return nil, nil, err
	}
	var h header
	if err := json.Unmarshal(buf[:hl], &h); err != nil {
		return nil, nil, fmt.Errorf("frame header: %w", err)
	}
	var payload []byte
	if pl > 0 {
		payload = buf[hl:]
	}
	return &h, payload, nil
}
