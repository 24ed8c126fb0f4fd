package templates

import (
	"fmt"
	"reflect"
	"sort"
	"text/template"
)

// entry is one function available to templates, prepared once for wrapping.
type entry struct {
	name     string
	fn       reflect.Value
	wrapper  reflect.Type // the function's parameters; its result and an error
	variadic bool
	hasErr   bool
	rule     rule
}

var (
	errorType = reflect.TypeFor[error]()
	nilError  = reflect.Zero(errorType)

	// catalog holds every function templates can call; parseFuncs has their names, for checking syntax.
	catalog    = buildCatalog()
	parseFuncs = func() template.FuncMap {
		fm := template.FuncMap{}
		for name := range catalog {
			fm[name] = func() string { return "" }
		}
		return fm
	}()
)

func buildCatalog() map[string]*entry {
	out := map[string]*entry{}
	for name, fn := range functions() {
		v := reflect.ValueOf(fn)
		t := v.Type()
		ins := make([]reflect.Type, t.NumIn())
		for i := range ins {
			ins[i] = t.In(i)
		}
		out[name] = &entry{
			name:     name,
			fn:       v,
			wrapper:  reflect.FuncOf(ins, []reflect.Type{t.Out(0), errorType}, t.IsVariadic()),
			variadic: t.IsVariadic(),
			hasErr:   t.NumOut() == 2,
			rule:     rules[name],
		}
	}
	return out
}

// functionNames lists the functions templates can call, sorted.
func functionNames() []string {
	names := make([]string, 0, len(catalog))
	for name := range catalog {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// bind wraps every function of the catalog so that a call is charged to b: one step; its arguments must add up
// to at most ValueBytes; the function's own rule (rules.go) refuses arguments that would make it allocate or
// work too much before it runs; and its result must be within ValueBytes and ValueDepth.
func (b *budget) bind() template.FuncMap {
	fm := make(template.FuncMap, len(catalog)+len(hidden))
	for name, e := range catalog {
		fm[name] = reflect.MakeFunc(e.wrapper, func(args []reflect.Value) []reflect.Value {
			out, err := b.call(e, args)
			if err != nil {
				return []reflect.Value{reflect.Zero(e.wrapper.Out(0)), reflect.ValueOf(&err).Elem()}
			}
			return []reflect.Value{out, nilError}
		}).Interface()
	}
	fm[stepFunc] = b.loopStep
	fm[enterFunc] = b.enter
	fm[leaveFunc] = b.leave
	fm[printFunc] = b.printGuard
	return fm
}

func (b *budget) call(e *entry, args []reflect.Value) (reflect.Value, error) {
	if err := b.step(); err != nil {
		return reflect.Value{}, err
	}
	in := 0
	for _, a := range args {
		m := sizeOf(a, b.lim.ValueBytes-in)
		in += m.bytes
		if in > b.lim.ValueBytes {
			return reflect.Value{}, b.valueError(fmt.Sprintf("the arguments of %s add up to more than %d bytes", e.name, in))
		}
		if m.depth > b.lim.ValueDepth {
			return reflect.Value{}, &LimitError{Limit: "ValueDepth", Max: int64(b.lim.ValueDepth),
				Detail: fmt.Sprintf("an argument of %s nests %d levels deep", e.name, m.depth)}
		}
	}
	if e.rule != nil {
		if err := e.rule(&b.lim, e.name, args); err != nil {
			return reflect.Value{}, err
		}
	}
	var res []reflect.Value
	if e.variadic {
		res = e.fn.CallSlice(args)
	} else {
		res = e.fn.Call(args)
	}
	if e.hasErr && !res[1].IsNil() {
		return reflect.Value{}, res[1].Interface().(error)
	}
	m := sizeOf(res[0], b.lim.ValueBytes)
	if m.bytes > b.lim.ValueBytes {
		return reflect.Value{}, b.valueError(fmt.Sprintf("%s built a value of more than %d bytes", e.name, m.bytes))
	}
	if m.depth > b.lim.ValueDepth {
		return reflect.Value{}, &LimitError{Limit: "ValueDepth", Max: int64(b.lim.ValueDepth),
			Detail: fmt.Sprintf("%s built a value nested %d levels deep", e.name, m.depth)}
	}
	if err := b.charge(int64(in + m.bytes)); err != nil {
		return reflect.Value{}, err
	}
	return res[0], nil
}

func (b *budget) valueError(detail string) error {
	return &LimitError{Limit: "ValueBytes", Max: int64(b.lim.ValueBytes), Detail: detail}
}
