package wirejson

import (
	"reflect"
	"sync"
)

// planKind says how a type is decoded. Plans are built once per root type, so decoding a value costs no type
// inspection (reflect's Implements is slow, and in the sandbox everything slow is slower).
type planKind uint8

const (
	planFallback planKind = iota // encoding/json decodes the value
	planRaw                      // json.RawMessage
	planString
	planBool
	planInt
	planUint
	planPointer
	planBytes
	planSlice
	planStringSlice // []string
	planMap
	planStringMap // map[string]string
	planStruct
)

type plan struct {
	kind planKind
	typ  reflect.Type
	elem *plan // pointer, slice and map elements
	si   *structInfo
	// fieldPlans parallel si.fields.
	fieldPlans []*plan
}

var (
	plans           sync.Map // reflect.Type -> *plan
	stringSliceType = reflect.TypeFor[[]string]()
	stringMapType   = reflect.TypeFor[map[string]string]()
)

func planOf(t reflect.Type) *plan {
	if p, ok := plans.Load(t); ok {
		return p.(*plan)
	}
	p := buildPlan(t, map[reflect.Type]*plan{})
	actual, _ := plans.LoadOrStore(t, p)
	return actual.(*plan)
}

func buildPlan(t reflect.Type, building map[reflect.Type]*plan) *plan {
	if p, ok := building[t]; ok {
		return p // recursive type: the plan is completed by the outer call
	}
	p := &plan{typ: t}
	building[t] = p
	switch {
	case t == rawMessageType:
		p.kind = planRaw
		return p
	case customUnmarshal(t):
		return p
	case t == stringSliceType:
		p.kind = planStringSlice
		return p
	case t == stringMapType:
		p.kind = planStringMap
		return p
	}
	switch t.Kind() {
	case reflect.String:
		p.kind = planString
	case reflect.Bool:
		p.kind = planBool
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		p.kind = planInt
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		p.kind = planUint
	case reflect.Pointer:
		if !customUnmarshal(t.Elem()) {
			p.kind, p.elem = planPointer, buildPlan(t.Elem(), building)
		}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			p.kind = planBytes
		} else {
			p.kind, p.elem = planSlice, buildPlan(t.Elem(), building)
		}
	case reflect.Map:
		if t.Key().Kind() == reflect.String && !customUnmarshal(t.Key()) {
			p.kind, p.elem = planMap, buildPlan(t.Elem(), building)
		}
	case reflect.Struct:
		if si := structInfoOf(t); !si.fallback {
			p.kind, p.si = planStruct, si
			p.fieldPlans = make([]*plan, len(si.fields))
			for i, f := range si.fields {
				p.fieldPlans[i] = buildPlan(t.Field(f.index).Type, building)
			}
		}
	}
	return p
}
