package wirejson

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"reflect"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// maxDepth is encoding/json's nesting limit; it also bounds this decoder's recursion.
const maxDepth = 10000

// Unmarshal decodes data into v, a non-nil pointer, like json.Unmarshal.
func Unmarshal(data []byte, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return errors.New("wirejson: Unmarshal needs a non-nil pointer")
	}
	d := decoder{data: data}
	if ok, err := decodeGenerated(&d, v); ok {
		if err != nil {
			return err
		}
	} else if err := d.value(rv.Elem(), planOf(rv.Elem().Type()), 0); err != nil {
		return err
	}
	d.ws()
	if d.pos != len(d.data) {
		return d.syntax("after top-level value")
	}
	return nil
}

type decoder struct {
	data []byte
	pos  int
	// src is a string copy of data, made on first use, that plain string values are sliced from: one
	// allocation per document instead of one per string. In the sandbox an allocation costs about a
	// microsecond (the allocator's loops each pay the interrupt check), more than decoding the string.
	src string
	// arena holds unescaped string contents. Its capacity is the input's length, which the unescaped contents
	// of all strings together do not exceed, so it is allocated once and never moves; a string that would
	// overflow it (only U+FFFD repairs can grow text) gets its own buffer.
	arena []byte
}

// source returns the string copy of the input.
func (d *decoder) source() string {
	if d.src == "" && len(d.data) > 0 {
		d.src = string(d.data)
	}
	return d.src
}

func (d *decoder) syntax(what string) error {
	if d.pos >= len(d.data) {
		return errors.New("unexpected end of JSON input")
	}
	return fmt.Errorf("invalid character %q %s (offset %d)", d.data[d.pos], what, d.pos)
}

func (d *decoder) ws() {
	// Compact JSON has no whitespace: check once without entering the loop, whose every iteration costs an
	// interrupt check in the sandbox.
	if d.pos < len(d.data) && d.data[d.pos] > ' ' {
		return
	}
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

// value decodes the value at d.pos into v, following p.
func (d *decoder) value(v reflect.Value, p *plan, depth int) error {
	if depth > maxDepth {
		return errors.New("exceeded max depth")
	}
	d.ws()
	if d.pos >= len(d.data) {
		return d.syntax("")
	}
	switch p.kind {
	case planRaw:
		start := d.pos
		if err := d.skip(depth); err != nil {
			return err
		}
		v.SetBytes(append([]byte(nil), d.data[start:d.pos]...))
		return nil
	case planFallback:
		return d.fallback(v, depth)
	}
	c := d.data[d.pos]
	if c == 'n' {
		if err := d.literal("null"); err != nil {
			return err
		}
		switch p.typ.Kind() {
		case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Interface:
			v.SetZero()
		}
		return nil
	}
	switch p.kind {
	case planPointer:
		if v.IsNil() {
			v.Set(reflect.New(p.typ.Elem()))
		}
		return d.value(v.Elem(), p.elem, depth+1)
	case planString:
		if c != '"' {
			return d.mismatch(p.typ, depth)
		}
		s, err := d.str()
		if err != nil {
			return err
		}
		v.SetString(s)
	case planBool:
		switch c {
		case 't':
			if err := d.literal("true"); err != nil {
				return err
			}
			v.SetBool(true)
		case 'f':
			if err := d.literal("false"); err != nil {
				return err
			}
			v.SetBool(false)
		default:
			return d.mismatch(p.typ, depth)
		}
	case planInt:
		tok, err := d.number()
		if err != nil {
			return d.mismatchOr(err, p.typ)
		}
		n, err := strconv.ParseInt(tok, 10, p.typ.Bits())
		if err != nil {
			return fmt.Errorf("cannot unmarshal number %s into Go value of type %s", tok, p.typ)
		}
		v.SetInt(n)
	case planUint:
		tok, err := d.number()
		if err != nil {
			return d.mismatchOr(err, p.typ)
		}
		n, err := strconv.ParseUint(tok, 10, p.typ.Bits())
		if err != nil {
			return fmt.Errorf("cannot unmarshal number %s into Go value of type %s", tok, p.typ)
		}
		v.SetUint(n)
	case planBytes:
		return d.bytes(v, c, depth)
	case planStringSlice:
		if c != '[' {
			return d.mismatch(p.typ, depth)
		}
		return d.stringSlice(v, depth)
	case planSlice:
		if c != '[' {
			return d.mismatch(p.typ, depth)
		}
		return d.slice(v, p, depth)
	case planStringMap:
		if c != '{' {
			return d.mismatch(p.typ, depth)
		}
		return d.stringMap(v, depth)
	case planMap:
		if c != '{' {
			return d.mismatch(p.typ, depth)
		}
		return d.mapping(v, p, depth)
	case planStruct:
		if c != '{' {
			return d.mismatch(p.typ, depth)
		}
		return d.object(v, p, depth)
	}
	return nil
}

// fallback decodes the next value with encoding/json.
func (d *decoder) fallback(v reflect.Value, depth int) error {
	start := d.pos
	if err := d.skip(depth); err != nil {
		return err
	}
	return json.Unmarshal(d.data[start:d.pos], v.Addr().Interface())
}

// mismatch reports a JSON value of the wrong kind, after checking that it is at least valid JSON (a syntax
// error wins, as in encoding/json).
func (d *decoder) mismatch(t reflect.Type, depth int) error {
	start := d.pos
	if err := d.skip(depth); err != nil {
		return err
	}
	return fmt.Errorf("cannot unmarshal %s into Go value of type %s", kindOf(d.data[start]), t)
}

func (d *decoder) mismatchOr(err error, t reflect.Type) error {
	if d.pos < len(d.data) {
		switch d.data[d.pos] {
		case '"', '{', '[', 't', 'f':
			return d.mismatch(t, 0)
		}
	}
	return err
}

func kindOf(c byte) string {
	switch c {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "bool"
	default:
		return "number"
	}
}

func (d *decoder) literal(lit string) error {
	if len(d.data)-d.pos < len(lit) || string(d.data[d.pos:d.pos+len(lit)]) != lit {
		for i := 0; i < len(lit) && d.pos < len(d.data) && d.data[d.pos] == lit[i]; i++ {
			d.pos++
		}
		return d.syntax("in literal " + lit)
	}
	d.pos += len(lit)
	return nil
}

func (d *decoder) bytes(v reflect.Value, c byte, depth int) error {
	if c != '"' {
		return d.mismatch(v.Type(), depth)
	}
	s, err := d.str()
	if err != nil {
		return err
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return fmt.Errorf("illegal base64 data: %w", err)
	}
	v.SetBytes(b)
	return nil
}

func (d *decoder) slice(v reflect.Value, p *plan, depth int) error {
	d.pos++                          // [
	out := reflect.New(p.typ).Elem() // addressable, so it can Grow in place
	out.Set(reflect.MakeSlice(p.typ, 0, 4))
	d.ws()
	if d.pos < len(d.data) && d.data[d.pos] == ']' {
		d.pos++
		v.Set(out)
		return nil
	}
	for {
		n := out.Len()
		out.Grow(1)
		out.SetLen(n + 1)
		if err := d.value(out.Index(n), p.elem, depth+1); err != nil {
			return err
		}
		if done, err := d.nextElement(); done || err != nil {
			if err == nil {
				v.Set(out)
			}
			return err
		}
	}
}

// stringSlice is slice for []string, without reflection per element.
func (d *decoder) stringSlice(v reflect.Value, depth int) error {
	d.pos++ // [
	out := make([]string, 0, 4)
	d.ws()
	if d.pos < len(d.data) && d.data[d.pos] == ']' {
		d.pos++
		v.Set(reflect.ValueOf(out))
		return nil
	}
	for {
		d.ws()
		var s string
		switch {
		case d.pos < len(d.data) && d.data[d.pos] == '"':
			var err error
			if s, err = d.str(); err != nil {
				return err
			}
		case d.pos < len(d.data) && d.data[d.pos] == 'n':
			if err := d.literal("null"); err != nil {
				return err
			}
		default:
			return d.mismatchOr(d.syntax("looking for beginning of value"), stringSliceType.Elem())
		}
		out = append(out, s)
		if done, err := d.nextElement(); done || err != nil {
			if err == nil {
				v.Set(reflect.ValueOf(out))
			}
			return err
		}
	}
}

// nextElement consumes the separator after an array element and reports whether the array ended.
func (d *decoder) nextElement() (bool, error) {
	d.ws()
	if d.pos >= len(d.data) {
		return false, d.syntax("")
	}
	switch d.data[d.pos] {
	case ',':
		d.pos++
		return false, nil
	case ']':
		d.pos++
		return true, nil
	}
	return false, d.syntax("after array element")
}

// members iterates an object's members, calling fn with each key and the decoder positioned at the value.
// The key aliases the input (or a scratch buffer) and is only valid during the call: struct field lookups
// need no string, so none is allocated.
func (d *decoder) members(fn func(key []byte) error) error {
	d.pos++ // {
	d.ws()
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		return nil
	}
	for {
		d.ws()
		if d.pos >= len(d.data) || d.data[d.pos] != '"' {
			return d.syntax("looking for beginning of object key string")
		}
		key, err := d.strBytes()
		if err != nil {
			return err
		}
		d.ws()
		if d.pos >= len(d.data) || d.data[d.pos] != ':' {
			return d.syntax("after object key")
		}
		d.pos++
		if err := fn(key); err != nil {
			return err
		}
		d.ws()
		if d.pos >= len(d.data) {
			return d.syntax("")
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
		case '}':
			d.pos++
			return nil
		default:
			return d.syntax("after object key:value pair")
		}
	}
}

func (d *decoder) mapping(v reflect.Value, p *plan, depth int) error {
	if v.IsNil() {
		v.Set(reflect.MakeMap(p.typ))
	}
	keyType, elemType := p.typ.Key(), p.typ.Elem()
	return d.members(func(key []byte) error {
		k := reflect.ValueOf(string(key)).Convert(keyType)
		elem := reflect.New(elemType).Elem()
		if err := d.value(elem, p.elem, depth+1); err != nil {
			return err
		}
		v.SetMapIndex(k, elem)
		return nil
	})
}

// stringMap is mapping for map[string]string, without reflection per entry.
func (d *decoder) stringMap(v reflect.Value, depth int) error {
	if v.IsNil() {
		v.Set(reflect.MakeMap(stringMapType))
	}
	m := v.Interface().(map[string]string)
	return d.members(func(k []byte) error {
		key := string(k)
		d.ws()
		if d.pos < len(d.data) && d.data[d.pos] == '"' {
			s, err := d.str()
			if err != nil {
				return err
			}
			m[key] = s
			return nil
		}
		if d.pos < len(d.data) && d.data[d.pos] == 'n' {
			if err := d.literal("null"); err != nil {
				return err
			}
			m[key] = "" // encoding/json stores the zero value, replacing an earlier duplicate
			return nil
		}
		return d.mismatchOr(d.syntax("looking for beginning of value"), stringMapType.Elem())
	})
}

func (d *decoder) object(v reflect.Value, p *plan, depth int) error {
	si := p.si
	return d.members(func(key []byte) error {
		i, ok := si.byName[string(key)]
		if !ok {
			i, ok = si.byFolded[foldName(string(key))]
		}
		if !ok {
			return d.skip(depth + 1)
		}
		return d.value(v.Field(si.fields[i].index), p.fieldPlans[i], depth+1)
	})
}

// str decodes the string at d.pos. A plain string is a slice of the document's string copy; a string that
// needed unescaping or UTF-8 repair is the fresh buffer strBytes made, which nothing else references.
func (d *decoder) str() (string, error) {
	start := d.pos + 1
	b, err := d.strBytes()
	if err != nil || len(b) == 0 {
		return "", err
	}
	if len(b) <= len(d.data)-start && unsafe.SliceData(b) == unsafe.SliceData(d.data[start:]) {
		return d.source()[start : start+len(b)], nil
	}
	return unsafe.String(unsafe.SliceData(b), len(b)), nil
}

// strBytes decodes the string at d.pos. The common case — no escapes, ASCII or valid UTF-8 — is a scan eight
// bytes at a time that jumps straight to the closing quote and returns a slice of the input; otherwise the
// result is a new buffer.
func (d *decoder) strBytes() ([]byte, error) {
	data := d.data
	start := d.pos + 1
	i := start
	var high uint64 // the high bits of every byte scanned: zero means ASCII, which needs no UTF-8 check
	for {
		if i+8 <= len(data) {
			x := binary.LittleEndian.Uint64(data[i:])
			m := unquoteMask(x)
			if m == 0 {
				high |= x
				i += 8
				continue
			}
			n := bits.TrailingZeros64(m) / 8
			high |= x & (1<<(8*n) - 1)
			i += n
		} else if i >= len(data) {
			d.pos = len(data)
			return nil, d.syntax("in string literal")
		}
		switch c := data[i]; {
		case c == '"':
			d.pos = i + 1
			s := data[start:i]
			if high&highs != 0 && !utf8.Valid(s) {
				return appendValidUTF8(nil, s), nil
			}
			return s, nil
		case c == '\\':
			return d.strEscaped(start, i)
		case c < 0x20:
			d.pos = i
			return nil, d.syntax("in string literal")
		}
		high |= uint64(data[i])
		i++
	}
}

// strEscaped decodes a string with escape sequences; start is where its content begins and i the first
// backslash. Runs between escapes are found eight bytes at a time.
func (d *decoder) strEscaped(start, i int) ([]byte, error) {
	data := d.data
	if d.arena == nil {
		d.arena = make([]byte, 0, len(data))
	}
	out := d.arena[len(d.arena):len(d.arena):cap(d.arena)]
	defer func() {
		// Keep what was written in place; a reallocated out is its own buffer.
		if len(out) > 0 && len(d.arena) < cap(d.arena) && unsafe.SliceData(out) == unsafe.SliceData(d.arena[len(d.arena):cap(d.arena)]) {
			d.arena = d.arena[:len(d.arena)+len(out)]
		}
	}()
	run := start // start of bytes not yet copied to out
	for i < len(data) {
		if i+8 <= len(data) {
			m := unquoteMask(binary.LittleEndian.Uint64(data[i:]))
			if m == 0 {
				i += 8
				continue
			}
			i += bits.TrailingZeros64(m) / 8
		}
		c := data[i]
		switch {
		case c == '"':
			out = appendRun(out, data[run:i])
			d.pos = i + 1
			return out, nil
		case c < 0x20:
			d.pos = i
			return nil, d.syntax("in string literal")
		case c != '\\':
			i++
			continue
		}
		out = appendRun(out, data[run:i])
		if i+1 >= len(data) {
			break
		}
		i++
		switch e := data[i]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(data, i+1)
			if !ok {
				d.pos = i
				return nil, d.syntax("in \\u hexadecimal character escape")
			}
			i += 4
			if utf16.IsSurrogate(r) {
				if r2, ok := hex4(data, i+3); ok && i+2 < len(data) && data[i+1] == '\\' && data[i+2] == 'u' {
					if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
						out = utf8.AppendRune(out, dec)
						i += 6
						break
					}
				}
				r = utf8.RuneError
			}
			out = utf8.AppendRune(out, r)
		default:
			d.pos = i
			return nil, d.syntax("in string escape code")
		}
		i++
		run = i
	}
	d.pos = len(data)
	return nil, d.syntax("in string literal")
}

// appendRun appends unescaped string content, replacing invalid UTF-8 like encoding/json.
func appendRun(out, run []byte) []byte {
	if utf8.Valid(run) {
		return append(out, run...)
	}
	return appendValidUTF8(out, run)
}

func hex4(data []byte, at int) (rune, bool) {
	if at+4 > len(data) {
		return 0, false
	}
	var r rune
	for _, c := range data[at : at+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r*16 + rune(c)
	}
	return r, true
}

// appendValidUTF8 replaces each invalid byte with U+FFFD, as encoding/json does.
func appendValidUTF8(out, s []byte) []byte {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			out = utf8.AppendRune(out, utf8.RuneError)
		} else {
			out = append(out, s[i:i+size]...)
		}
		i += size
	}
	return out
}

// number scans a JSON number and returns its text.
func (d *decoder) number() (string, error) {
	data, i := d.data, d.pos
	start := i
	if i < len(data) && data[i] == '-' {
		i++
	}
	switch {
	case i < len(data) && data[i] == '0':
		i++
	case i < len(data) && '1' <= data[i] && data[i] <= '9':
		for i < len(data) && '0' <= data[i] && data[i] <= '9' {
			i++
		}
	default:
		d.pos = i
		return "", d.syntax("looking for beginning of value")
	}
	if i < len(data) && data[i] == '.' {
		i++
		if i >= len(data) || data[i] < '0' || data[i] > '9' {
			d.pos = i
			return "", d.syntax("after decimal point in numeric literal")
		}
		for i < len(data) && '0' <= data[i] && data[i] <= '9' {
			i++
		}
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if i >= len(data) || data[i] < '0' || data[i] > '9' {
			d.pos = i
			return "", d.syntax("in exponent of numeric literal")
		}
		for i < len(data) && '0' <= data[i] && data[i] <= '9' {
			i++
		}
	}
	d.pos = i
	return d.source()[start:i], nil
}

// skip validates and steps over one value.
func (d *decoder) skip(depth int) error {
	if depth > maxDepth {
		return errors.New("exceeded max depth")
	}
	d.ws()
	if d.pos >= len(d.data) {
		return d.syntax("")
	}
	switch c := d.data[d.pos]; c {
	case '"':
		_, err := d.strBytes()
		return err
	case '{':
		return d.members(func([]byte) error { return d.skip(depth + 1) })
	case '[':
		d.pos++
		d.ws()
		if d.pos < len(d.data) && d.data[d.pos] == ']' {
			d.pos++
			return nil
		}
		for {
			if err := d.skip(depth + 1); err != nil {
				return err
			}
			d.ws()
			if d.pos >= len(d.data) {
				return d.syntax("")
			}
			switch d.data[d.pos] {
			case ',':
				d.pos++
			case ']':
				d.pos++
				return nil
			default:
				return d.syntax("after array element")
			}
		}
	case 't':
		return d.literal("true")
	case 'f':
		return d.literal("false")
	case 'n':
		return d.literal("null")
	default:
		_, err := d.number()
		return err
	}
}
