package wirejson

import (
	"encoding"
	"encoding/json"
	"reflect"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

var (
	rawMessageType      = reflect.TypeFor[json.RawMessage]()
	jsonMarshalerType   = reflect.TypeFor[json.Marshaler]()
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textMarshalerType   = reflect.TypeFor[encoding.TextMarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// field is one JSON-visible struct field.
type field struct {
	name      string
	nameBytes []byte // `"name":`, ready to append
	folded    string
	index     int
	omitEmpty bool
}

// structInfo describes how a struct type maps to JSON; fallback means encoding/json handles the whole type.
type structInfo struct {
	fields   []field
	byName   map[string]int
	byFolded map[string]int
	fallback bool
}

var structCache sync.Map // reflect.Type -> *structInfo

func structInfoOf(t reflect.Type) *structInfo {
	if si, ok := structCache.Load(t); ok {
		return si.(*structInfo)
	}
	si := &structInfo{byName: map[string]int{}, byFolded: map[string]int{}}
	for i := range t.NumField() {
		sf := t.Field(i)
		if sf.Anonymous {
			// Embedded fields promote their fields with encoding/json's precedence rules; not worth
			// re-implementing for types the ABI does not have.
			si.fallback = true
			break
		}
		if !sf.IsExported() {
			continue
		}
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if strings.Contains(","+opts+",", ",string,") || (name != "" && !validTagName(name)) {
			si.fallback = true
			break
		}
		if name == "" {
			name = sf.Name
		}
		f := field{name: name, index: i, omitEmpty: strings.Contains(","+opts+",", ",omitempty,")}
		f.nameBytes = append(appendString(nil, name), ':')
		f.folded = foldName(name)
		if _, dup := si.byName[name]; dup {
			si.fallback = true // duplicate names cancel each other in encoding/json
			break
		}
		si.byName[name] = len(si.fields)
		if _, ok := si.byFolded[f.folded]; !ok {
			si.byFolded[f.folded] = len(si.fields)
		}
		si.fields = append(si.fields, f)
	}
	actual, _ := structCache.LoadOrStore(t, si)
	return actual.(*structInfo)
}

// validTagName mirrors encoding/json's rule for names it accepts from tags.
func validTagName(s string) bool {
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}

// foldName folds a key the way encoding/json matches keys to fields case-insensitively.
func foldName(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < utf8.RuneSelf {
			if 'a' <= r && r <= 'z' {
				r -= 'a' - 'A'
			}
			b.WriteRune(r)
			continue
		}
		b.WriteRune(unicode.ToUpper(unicode.ToLower(r)))
	}
	return b.String()
}

// customJSON reports whether values of t marshal themselves.
func customMarshal(t reflect.Type) bool {
	return t.Implements(jsonMarshalerType) || t.Implements(textMarshalerType) ||
		reflect.PointerTo(t).Implements(jsonMarshalerType) || reflect.PointerTo(t).Implements(textMarshalerType)
}

func customUnmarshal(t reflect.Type) bool {
	return reflect.PointerTo(t).Implements(jsonUnmarshalerType) || reflect.PointerTo(t).Implements(textUnmarshalerType)
}

func reflectTypeOf[T any]() reflect.Type { return reflect.TypeFor[T]() }
