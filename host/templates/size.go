package templates

import (
	"reflect"
	"time"
)

// measure is an estimate of what a value costs once printed or serialized.
type measure struct {
	// bytes estimates the size of the value printed: the length of strings, 8 per number, and per element of a
	// list or map 8 plus 2 per nesting level (the indentation of YAML or pretty JSON).
	bytes int
	// depth is how deeply lists, maps and structs nest.
	depth int
	// nodes counts scalars and containers; fmt pads every one of them to a verb's width.
	nodes int
}

var timeType = reflect.TypeFor[time.Time]()

// sizeOf measures v, giving up as soon as the size passes limit: a value built by aliasing (a list holding the
// same map a million times, a map that holds itself, YAML aliases) is small in memory but huge once printed,
// and walking it in full could take forever. The walk visits at most about limit/8 nodes.
func sizeOf(v reflect.Value, limit int) measure {
	s := sizer{limit: limit}
	s.walk(v, 0)
	return measure{bytes: s.bytes, depth: s.maxDepth, nodes: s.nodes}
}

type sizer struct {
	limit, bytes, maxDepth, nodes int
}

func (s *sizer) over() bool { return s.bytes > s.limit }

func (s *sizer) walk(v reflect.Value, depth int) {
	if s.over() {
		return
	}
	s.nodes++
	if depth > s.maxDepth {
		s.maxDepth = depth
	}
	if !v.IsValid() {
		s.bytes++
		return
	}
	switch v.Kind() {
	case reflect.String:
		s.bytes += v.Len()
	case reflect.Interface:
		s.nodes--
		s.walk(v.Elem(), depth)
	case reflect.Pointer:
		s.bytes++ // so that a cycle through pointers ends at the limit
		if !v.IsNil() {
			s.walk(v.Elem(), depth)
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			s.bytes += v.Len()
			return
		}
		s.bytes += 8
		for i := 0; i < v.Len() && !s.over(); i++ {
			s.bytes += 8 + 2*depth
			s.walk(v.Index(i), depth+1)
		}
	case reflect.Map:
		s.bytes += 8
		it := v.MapRange()
		for it.Next() && !s.over() {
			s.bytes += 8 + 2*depth
			s.walk(it.Key(), depth+1)
			s.walk(it.Value(), depth+1)
		}
	case reflect.Struct:
		if v.Type() == timeType {
			s.bytes += 40
			return
		}
		s.bytes += 8
		for i := 0; i < v.NumField() && !s.over(); i++ {
			s.bytes += 8 + 2*depth
			s.walk(v.Field(i), depth+1)
		}
	default: // numbers, booleans, functions, channels
		s.bytes += 8
	}
}
