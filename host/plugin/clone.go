package plugin

import "reflect"

// clone returns a deep copy of v, a pointer to a decoded response: the memo hands each hit its own copy, so a
// caller that changes what it got (the render pipeline edits the configuration a plugin returned) never
// changes what the memo remembers for the next. Copying the decoded value costs a fraction of decoding the
// JSON again. The ABI's responses are plain data (TestClonesShareNothing checks they have no unexported
// fields, which a clone would share).
func clone(v any) any {
	src := reflect.ValueOf(v)
	dst := reflect.New(src.Type()).Elem()
	copyValue(dst, src)
	return dst.Interface()
}

func copyValue(dst, src reflect.Value) {
	switch src.Kind() {
	case reflect.Pointer:
		if src.IsNil() {
			return
		}
		p := reflect.New(src.Type().Elem())
		copyValue(p.Elem(), src.Elem())
		dst.Set(p)
	case reflect.Interface:
		if src.IsNil() {
			return
		}
		c := reflect.New(src.Elem().Type()).Elem()
		copyValue(c, src.Elem())
		dst.Set(c)
	case reflect.Struct:
		dst.Set(src)
		for i := range src.NumField() {
			if f := dst.Field(i); f.CanSet() {
				copyValue(f, src.Field(i))
			}
		}
	case reflect.Slice:
		if src.IsNil() {
			return
		}
		s := reflect.MakeSlice(src.Type(), src.Len(), src.Len())
		if plain(src.Type().Elem().Kind()) {
			reflect.Copy(s, src)
		} else {
			for i := range src.Len() {
				copyValue(s.Index(i), src.Index(i))
			}
		}
		dst.Set(s)
	case reflect.Map:
		if src.IsNil() {
			return
		}
		m := reflect.MakeMapWithSize(src.Type(), src.Len())
		for it := src.MapRange(); it.Next(); {
			k, v := reflect.New(src.Type().Key()).Elem(), reflect.New(src.Type().Elem()).Elem()
			copyValue(k, it.Key())
			copyValue(v, it.Value())
			m.SetMapIndex(k, v)
		}
		dst.Set(m)
	default:
		dst.Set(src)
	}
}

// plain says values of kind k hold no references (strings are immutable), so a copy of their bytes is deep.
func plain(k reflect.Kind) bool {
	switch k {
	case reflect.Pointer, reflect.Interface, reflect.Struct, reflect.Slice, reflect.Map, reflect.Array, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return false
	}
	return true
}
