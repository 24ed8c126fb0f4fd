package wirejson

import (
	"encoding/base64"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"unsafe"
)

// Helpers for the code in abi_gen.go, which the generator in internal/gen writes for the ABI's types: direct
// field access and a switch per struct instead of reflection, which is what makes decoding fast in the
// sandbox. Each decoder handles null (leaving the value alone, or clearing pointers, slices and maps) and
// reports a value of the wrong JSON kind after checking its syntax, like encoding/json.

type decodeFunc[T any] func(d *decoder, p *T, depth int) error

type encodeFunc[T any] func(e *encoder, p *T) error

// begin skips whitespace and reports whether the next value is null (which it consumes).
func (d *decoder) begin() (null bool, err error) {
	d.ws()
	if d.pos >= len(d.data) {
		return false, d.syntax("")
	}
	if d.data[d.pos] == 'n' {
		return true, d.literal("null")
	}
	return false, nil
}

func decStr[S ~string](d *decoder, p *S, depth int) error {
	if null, err := d.begin(); null || err != nil {
		return err
	}
	if d.data[d.pos] != '"' {
		return d.mismatch(reflectTypeOf[S](), depth)
	}
	s, err := d.str()
	*p = S(s)
	return err
}

func decBool[B ~bool](d *decoder, p *B, depth int) error {
	if null, err := d.begin(); null || err != nil {
		return err
	}
	switch d.data[d.pos] {
	case 't':
		*p = true
		return d.literal("true")
	case 'f':
		*p = false
		return d.literal("false")
	}
	return d.mismatch(reflectTypeOf[B](), depth)
}

func decInt[I ~int | ~int8 | ~int16 | ~int32 | ~int64](d *decoder, p *I, depth int) error {
	if null, err := d.begin(); null || err != nil {
		return err
	}
	tok, err := d.number()
	if err != nil {
		return d.mismatchOr(err, reflectTypeOf[I]())
	}
	var zero I
	n, err := strconv.ParseInt(tok, 10, int(unsafe.Sizeof(zero))*8)
	if err != nil {
		return &json.UnmarshalTypeError{Value: "number " + tok, Type: reflectTypeOf[I]()}
	}
	*p = I(n)
	return nil
}

func decRaw(d *decoder, p *json.RawMessage, depth int) error {
	d.ws()
	start := d.pos
	if err := d.skip(depth); err != nil {
		return err
	}
	*p = append(json.RawMessage(nil), d.data[start:d.pos]...)
	return nil
}

func decBytes(d *decoder, p *[]byte, depth int) error {
	if null, err := d.begin(); null || err != nil {
		if null {
			*p = nil
		}
		return err
	}
	if d.data[d.pos] != '"' {
		return d.mismatch(reflectTypeOf[[]byte](), depth)
	}
	s, err := d.strBytes()
	if err != nil {
		return err
	}
	b := make([]byte, base64.StdEncoding.DecodedLen(len(s)))
	n, err := base64.StdEncoding.Decode(b, s)
	if err != nil {
		return err
	}
	*p = b[:n]
	return nil
}

func decPtr[T any](d *decoder, p **T, elem decodeFunc[T], depth int) error {
	if null, err := d.begin(); null || err != nil {
		if null {
			*p = nil
		}
		return err
	}
	if *p == nil {
		*p = new(T)
	}
	return elem(d, *p, depth+1)
}

func decSlice[T any](d *decoder, p *[]T, elem decodeFunc[T], depth int) error {
	if null, err := d.begin(); null || err != nil {
		if null {
			*p = nil
		}
		return err
	}
	if d.data[d.pos] != '[' {
		return d.mismatch(reflectTypeOf[[]T](), depth)
	}
	d.pos++
	out := make([]T, 0, 4)
	d.ws()
	if d.pos < len(d.data) && d.data[d.pos] == ']' {
		d.pos++
		*p = out
		return nil
	}
	for {
		var zero T
		out = append(out, zero)
		if err := elem(d, &out[len(out)-1], depth+1); err != nil {
			return err
		}
		if done, err := d.nextElement(); done || err != nil {
			if err == nil {
				*p = out
			}
			return err
		}
	}
}

func decMap[T any](d *decoder, p *map[string]T, elem decodeFunc[T], depth int) error {
	if null, err := d.begin(); null || err != nil {
		if null {
			*p = nil
		}
		return err
	}
	if d.data[d.pos] != '{' {
		return d.mismatch(reflectTypeOf[map[string]T](), depth)
	}
	if *p == nil {
		*p = map[string]T{}
	}
	m := *p
	d.pos++
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
		key, err := d.str()
		if err != nil {
			return err
		}
		d.ws()
		if d.pos >= len(d.data) || d.data[d.pos] != ':' {
			return d.syntax("after object key")
		}
		d.pos++
		var v T
		if err := elem(d, &v, depth+1); err != nil {
			return err
		}
		m[key] = v
		if more, err := d.nextMember(); !more || err != nil {
			return err
		}
	}
}

// openObject starts decoding a struct: it reports false when there are no members to read (null, which
// leaves the struct alone, or {}).
func (d *decoder) openObject(t reflect.Type, depth int) (bool, error) {
	if null, err := d.begin(); null || err != nil {
		return false, err
	}
	if d.data[d.pos] != '{' {
		return false, d.mismatch(t, depth)
	}
	d.pos++
	d.ws()
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		return false, nil
	}
	return true, nil
}

// memberKey reads a member's key and the colon after it. The key is only valid until the next read.
func (d *decoder) memberKey() ([]byte, error) {
	d.ws()
	if d.pos >= len(d.data) || d.data[d.pos] != '"' {
		return nil, d.syntax("looking for beginning of object key string")
	}
	key, err := d.strBytes()
	if err != nil {
		return nil, err
	}
	d.ws()
	if d.pos >= len(d.data) || d.data[d.pos] != ':' {
		return nil, d.syntax("after object key")
	}
	d.pos++
	return key, nil
}

// nextMember consumes the separator after a member and reports whether another follows.
func (d *decoder) nextMember() (bool, error) {
	d.ws()
	if d.pos >= len(d.data) {
		return false, d.syntax("")
	}
	switch d.data[d.pos] {
	case ',':
		d.pos++
		return true, nil
	case '}':
		d.pos++
		return false, nil
	}
	return false, d.syntax("after object key:value pair")
}

// The encoders.

func (e *encoder) comma(first *bool) {
	if !*first {
		e.buf = append(e.buf, ',')
	}
	*first = false
}

func encStr[S ~string](e *encoder, p *S) error {
	e.buf = appendString(e.buf, string(*p))
	return nil
}

func encBool[B ~bool](e *encoder, p *B) error {
	e.buf = strconv.AppendBool(e.buf, bool(*p))
	return nil
}

func encInt[I ~int | ~int8 | ~int16 | ~int32 | ~int64](e *encoder, p *I) error {
	e.buf = strconv.AppendInt(e.buf, int64(*p), 10)
	return nil
}

func encRaw(e *encoder, p *json.RawMessage) error { return e.raw(*p) }

func encBytes(e *encoder, p *[]byte) error {
	if *p == nil {
		e.buf = append(e.buf, "null"...)
		return nil
	}
	e.buf = append(e.buf, '"')
	e.buf = base64.StdEncoding.AppendEncode(e.buf, *p)
	e.buf = append(e.buf, '"')
	return nil
}

func encPtr[T any](e *encoder, p **T, elem encodeFunc[T]) error {
	if *p == nil {
		e.buf = append(e.buf, "null"...)
		return nil
	}
	return elem(e, *p)
}

func encSlice[T any](e *encoder, p *[]T, elem encodeFunc[T]) error {
	if *p == nil {
		e.buf = append(e.buf, "null"...)
		return nil
	}
	e.buf = append(e.buf, '[')
	for i := range *p {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		if err := elem(e, &(*p)[i]); err != nil {
			return err
		}
	}
	e.buf = append(e.buf, ']')
	return nil
}

func encMap[T any](e *encoder, p *map[string]T, elem encodeFunc[T]) error {
	if *p == nil {
		e.buf = append(e.buf, "null"...)
		return nil
	}
	e.buf = append(e.buf, '{')
	for i, k := range slices.Sorted(maps.Keys(*p)) {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.buf = appendString(e.buf, k)
		e.buf = append(e.buf, ':')
		v := (*p)[k]
		if err := elem(e, &v); err != nil {
			return err
		}
	}
	e.buf = append(e.buf, '}')
	return nil
}
