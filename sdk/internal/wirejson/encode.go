package wirejson

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/bits"
	"reflect"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Marshal encodes v like json.Marshal, byte for byte.
func Marshal(v any) ([]byte, error) { return MarshalSize(v, 1024) }

// MarshalSize is Marshal with a guess of the output size, which saves the buffer's regrowth (each allocation
// is expensive in the sandbox). A render's response is usually about as large as its request.
func MarshalSize(v any, size int) ([]byte, error) {
	return AppendMarshal(make([]byte, 0, size), v)
}

// AppendMarshal appends the encoding of v to dst and returns the extended buffer, so that a caller encoding
// many values can reuse one buffer instead of allocating and regrowing one per value.
func AppendMarshal(dst []byte, v any) ([]byte, error) {
	e := encoder{buf: dst}
	if ok, err := encodeGenerated(&e, v); ok {
		if err != nil {
			return nil, err
		}
	} else if err := e.value(reflect.ValueOf(v), 0); err != nil {
		return nil, err
	}
	return e.buf, nil
}

type encoder struct{ buf []byte }

func (e *encoder) value(v reflect.Value, depth int) error {
	if !v.IsValid() {
		e.buf = append(e.buf, "null"...)
		return nil
	}
	if depth > maxDepth {
		return fmt.Errorf("json: unsupported value: encountered a cycle or nesting deeper than %d", maxDepth)
	}
	t := v.Type()
	if t == rawMessageType {
		return e.raw(v.Bytes())
	}
	if customMarshal(t) {
		return e.fallback(v)
	}
	switch t.Kind() {
	case reflect.String:
		e.buf = appendString(e.buf, v.String())
	case reflect.Bool:
		e.buf = strconv.AppendBool(e.buf, v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		e.buf = strconv.AppendInt(e.buf, v.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		e.buf = strconv.AppendUint(e.buf, v.Uint(), 10)
	case reflect.Pointer:
		if v.IsNil() {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		return e.value(v.Elem(), depth+1)
	case reflect.Slice:
		if v.IsNil() {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		if t.Elem().Kind() == reflect.Uint8 && !customMarshal(t.Elem()) {
			e.buf = append(e.buf, '"')
			e.buf = base64.StdEncoding.AppendEncode(e.buf, v.Bytes())
			e.buf = append(e.buf, '"')
			return nil
		}
		e.buf = append(e.buf, '[')
		for i := range v.Len() {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			if err := e.value(v.Index(i), depth+1); err != nil {
				return err
			}
		}
		e.buf = append(e.buf, ']')
	case reflect.Map:
		if t.Key().Kind() != reflect.String || customMarshal(t.Key()) {
			return e.fallback(v)
		}
		if v.IsNil() {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int {
			if a.String() < b.String() {
				return -1
			}
			if a.String() > b.String() {
				return 1
			}
			return 0
		})
		e.buf = append(e.buf, '{')
		for i, k := range keys {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.buf = appendString(e.buf, k.String())
			e.buf = append(e.buf, ':')
			if err := e.value(v.MapIndex(k), depth+1); err != nil {
				return err
			}
		}
		e.buf = append(e.buf, '}')
	case reflect.Struct:
		si := structInfoOf(t)
		if si.fallback {
			return e.fallback(v)
		}
		e.buf = append(e.buf, '{')
		first := true
		for i := range si.fields {
			f := &si.fields[i]
			fv := v.Field(f.index)
			if f.omitEmpty && isEmpty(fv) {
				continue
			}
			if !first {
				e.buf = append(e.buf, ',')
			}
			first = false
			e.buf = append(e.buf, f.nameBytes...)
			if err := e.value(fv, depth+1); err != nil {
				return err
			}
		}
		e.buf = append(e.buf, '}')
	default:
		// Floats (encoding/json's formatting is subtle), interfaces, arrays, ...
		return e.fallback(v)
	}
	return nil
}

func (e *encoder) fallback(v reflect.Value) error {
	b, err := json.Marshal(v.Interface())
	if err != nil {
		return err
	}
	e.buf = append(e.buf, b...)
	return nil
}

// raw appends a RawMessage compacted, as encoding/json does, after checking it is one valid value.
func (e *encoder) raw(b []byte) error {
	if b == nil {
		e.buf = append(e.buf, "null"...)
		return nil
	}
	d := decoder{data: b}
	d.ws()
	if err := d.skip(0); err != nil {
		return fmt.Errorf("json: error calling MarshalJSON for type json.RawMessage: %w", err)
	}
	d.ws()
	if d.pos != len(b) {
		return fmt.Errorf("json: error calling MarshalJSON for type json.RawMessage: %w", d.syntax("after top-level value"))
	}
	e.buf = appendCompact(e.buf, b)
	return nil
}

// appendCompact drops insignificant whitespace from valid JSON. encoding/json also escapes <, >, &, U+2028
// and U+2029 inside strings of a RawMessage; so does this.
func appendCompact(dst, src []byte) []byte {
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '"':
			j := i + 1
			for ; j < len(src) && src[j] != '"'; j++ {
				if src[j] == '\\' {
					j++
				}
			}
			dst = appendHTMLSafe(dst, src[i:j+1])
			i = j
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// appendHTMLSafe appends an already-quoted JSON string, escaping what encoding/json's compaction escapes.
func appendHTMLSafe(dst, s []byte) []byte {
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c == '<' || c == '>' || c == '&' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			i++
			start = i
			continue
		}
		if c == 0xE2 && i+2 < len(s) && s[i+1] == 0x80 && s[i+2]&^1 == 0xA8 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[s[i+2]&0xF])
			i += 3
			start = i
			continue
		}
		i++
	}
	return append(dst, s[start:]...)
}

func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}

const hexDigits = "0123456789abcdef"

// appendString quotes s exactly like encoding/json (HTML-safe, U+2028/U+2029 escaped, invalid UTF-8 as
// U+FFFD), copying runs of plain ASCII eight bytes at a time.
func appendString(dst []byte, s string) []byte { return appendQuoted(dst, s, true) }

// AppendText quotes s like encoding/json with SetEscapeHTML(false): <, > and & stay as they are. It is for
// the files a plugin writes as JSON (the SDK's node kit), which should read on the node as they were given.
func AppendText(dst []byte, s string) []byte { return appendQuoted(dst, s, false) }

func appendQuoted(dst []byte, s string, html bool) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if i+8 <= len(s) {
			var m uint64
			if html {
				m = quoteMask(stringWord(s, i))
			} else {
				m = textMask(stringWord(s, i))
			}
			if m == 0 {
				i += 8
				continue
			}
			i += bits.TrailingZeros64(m) / 8
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && (!html || (c != '<' && c != '>' && c != '&')) {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			start = i + size
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			start = i + size
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
