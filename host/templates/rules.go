package templates

import (
	"fmt"
	"math"
	"reflect"
	"regexp/syntax"
	"strings"
)

// A rule checks the arguments of a function whose result or running time can grow faster than its arguments,
// before it runs: repeat 3000000000 "x" must be refused before it allocates 3 GB, since an out-of-memory
// error kills the whole process. Every other function builds at most a small multiple of its arguments, which
// the budget bounds; TestEveryFunctionIsClassified keeps the two lists complete when sprig changes.
//
// A rule may also rewrite an argument: a function asked for "all" results is asked for one more than a
// value can hold, which the check of its result then refuses.
type rule func(l *Limits, name string, args []reflect.Value) error

var rules = map[string]rule{
	"repeat":    repeatRule,
	"indent":    indentRule,
	"nindent":   indentRule,
	"replace":   replaceRule,
	"join":      joinRule,
	"wrapWith":  wrapWithRule,
	"seq":       seqRule,
	"until":     untilRule,
	"untilStep": untilStepRule,
	"printf":    printfRule,

	"regexMatch": regexRule(nil), "mustRegexMatch": regexRule(nil),
	"regexFind": regexRule(nil), "mustRegexFind": regexRule(nil),
	"regexFindAll": regexRule(clampArg(2)), "mustRegexFindAll": regexRule(clampArg(2)),
	"regexSplit": regexRule(clampArg(2)), "mustRegexSplit": regexRule(clampArg(2)),
	"regexReplaceAll": regexRule(replaceAllRule(true)), "mustRegexReplaceAll": regexRule(replaceAllRule(true)),
	"regexReplaceAllLiteral":     regexRule(replaceAllRule(false)),
	"mustRegexReplaceAllLiteral": regexRule(replaceAllRule(false)),

	"split":     splitRule,
	"splitList": splitRule,
	"splitn":    clampArg(1),
	"fromYaml":  fromYAMLRule,

	"uniq":        uniqRule,
	"mustUniq":    uniqRule,
	"without":     withoutRule,
	"mustWithout": withoutRule,
	"chunk":       chunkRule,
	"mustChunk":   chunkRule,
}

// linear are the functions whose result is at most a small multiple of their arguments (escaping a string
// grows it at most six times) and whose time is proportional to it, checked by the generic bounds alone.
var linear = strings.Fields(`
	abbrev abbrevboth add add1 add1f addf adler32sum all any append atoi b32dec b32enc b64dec b64enc base
	biggest buildCustomCert camelcase cat ceil clean coalesce compact concat contains date date_in_zone
	date_modify dateInZone dateModify deepCopy deepEqual default dict dig dir div divf duration durationRound
	empty ext fail first float64 floor fromJson get has hasKey hasPrefix hasSuffix hello html htmlDate
	htmlDateInZone initial initials int int64 isAbs js kebabcase keys kindIs kindOf last list lower max maxf
	merge mergeOverwrite min minf mod mul mulf must_date_modify mustAppend mustCompact mustDateModify
	mustDeepCopy mustFirst mustFromJson mustHas mustInitial mustLast mustMerge mustMergeOverwrite mustPrepend
	mustPush mustRest mustReverse mustSlice mustToDate mustToJson mustToPrettyJson
	mustToRawJson nospace omit osBase osClean osDir osExt osIsAbs pick plural pluck prepend print println push
	quote regexQuoteMeta rest reverse round semver semverCompare set sha1sum sha256sum sha512sum slice snakecase sortAlpha squote sub subf
	substr swapcase ternary title toDate toDecimal toJson toPrettyJson toRawJson toString toStrings toToml
	toYaml trim trimAll trimPrefix trimSuffix trimall trunc tuple typeIs typeIsLike typeOf unixEpoch unset
	untitle upper urlJoin urlParse urlquery values wrap`)

func tooBig(l *Limits, name string, estimate float64) error {
	if estimate <= float64(l.ValueBytes) {
		return nil
	}
	return &LimitError{Limit: "ValueBytes", Max: int64(l.ValueBytes),
		Detail: fmt.Sprintf("%s would build about %.0f bytes", name, estimate)}
}

func repeatRule(l *Limits, name string, a []reflect.Value) error {
	count, s := a[0].Int(), a[1].String()
	if count < 0 {
		return fmt.Errorf("negative count %d", count)
	}
	return tooBig(l, name, float64(count)*float64(len(s)))
}

func indentRule(l *Limits, name string, a []reflect.Value) error {
	spaces, s := a[0].Int(), a[1].String()
	if spaces < 0 {
		return fmt.Errorf("negative indentation %d", spaces)
	}
	return tooBig(l, name, float64(len(s))+1+float64(spaces)*float64(strings.Count(s, "\n")+1))
}

func replaceRule(l *Limits, name string, a []reflect.Value) error {
	old, repl, src := a[0].String(), a[1].String(), a[2].String()
	if len(repl) <= len(old) {
		return nil
	}
	n := strings.Count(src, old) // one more than the number of runes when old is empty
	return tooBig(l, name, float64(len(src))+float64(n)*float64(len(repl)-len(old)))
}

func joinRule(l *Limits, name string, a []reflect.Value) error {
	sep, list := a[0].String(), elem(a[1])
	n := 1
	if list.Kind() == reflect.Slice || list.Kind() == reflect.Array {
		n = list.Len()
	}
	return tooBig(l, name, float64(sizeOf(list, l.ValueBytes).bytes)+float64(n)*float64(len(sep)))
}

func wrapWithRule(l *Limits, name string, a []reflect.Value) error {
	width, sep, s := max(a[0].Int(), 1), a[1].String(), a[2].String()
	return tooBig(l, name, float64(len(s))+(float64(len(s))/float64(width)+1)*float64(len(sep)))
}

// untilStepCount is how many numbers sprig's untilStep(start, stop, step) produces. Its loop adds step until it
// passes stop; when that addition would overflow, the loop wraps around and never ends (it appends until
// memory runs out), which overflow reports.
func untilStepCount(start, stop, step int64) (n float64, overflow bool) {
	switch {
	case stop < start && step < 0:
		// i > stop; i += step: the last addition reaches at least stop+1+step.
		return math.Ceil((float64(start) - float64(stop)) / -float64(step)), stop+1 < math.MinInt64-step
	case stop > start && step > 0:
		// i < stop; i += step: the last addition reaches at most stop-1+step.
		return math.Ceil((float64(stop) - float64(start)) / float64(step)), stop-1 > math.MaxInt64-step
	}
	return 0, false
}

// seqArgs are the arguments sprig's seq passes to untilStep (with Go's wrapping arithmetic, as seq does).
func seqArgs(p []int64) (start, stop, step int64) {
	switch len(p) {
	case 1:
		inc := int64(1)
		if p[0] < 1 {
			inc = -1
		}
		return 1, p[0] + inc, inc
	case 2:
		inc := int64(1)
		if p[1] < p[0] {
			inc = -1
		}
		return p[0], p[1] + inc, inc
	case 3:
		inc := int64(1)
		if p[2] < p[0] {
			if p[1] > 0 {
				return 0, 0, 0
			}
			inc = -1
		}
		return p[0], p[2] + inc, p[1]
	}
	return 0, 0, 0
}

func countRule(l *Limits, name string, start, stop, step int64, bytesEach float64) error {
	n, overflow := untilStepCount(start, stop, step)
	if overflow {
		return fmt.Errorf("%s from %d to %d by %d overflows the integers and never ends", name, start, stop, step)
	}
	return tooBig(l, name, n*bytesEach)
}

// seqRule: every number of seq's result is printed, up to 20 digits and a space.
func seqRule(l *Limits, name string, a []reflect.Value) error {
	p := make([]int64, a[0].Len())
	for i := range p {
		p[i] = a[0].Index(i).Int()
	}
	start, stop, step := seqArgs(p)
	return countRule(l, name, start, stop, step, 21)
}

// untilRule and untilStepRule: a list of numbers costs 16 bytes a number (see sizeOf).
func untilRule(l *Limits, name string, a []reflect.Value) error {
	count, step := a[0].Int(), int64(1)
	if count < 0 {
		step = -1
	}
	return countRule(l, name, 0, count, step, 16)
}

func untilStepRule(l *Limits, name string, a []reflect.Value) error {
	return countRule(l, name, a[0].Int(), a[1].Int(), a[2].Int(), 16)
}

// regexRule bounds the work of a regular expression: Go's run in time proportional to the size of the
// compiled program times the length of the text, and a short expression (a{1000}{1000}) compiles to a large
// program.
func regexRule(then rule) rule {
	return func(l *Limits, name string, a []reflect.Value) error {
		pattern, text := a[0].String(), a[1].String()
		re, err := syntax.Parse(pattern, syntax.Perl)
		if err != nil {
			return nil // the function reports it
		}
		prog, err := syntax.Compile(re.Simplify())
		if err != nil {
			return nil
		}
		if work := float64(len(prog.Inst)) * float64(len(text)+1); work > float64(l.ProductWork) {
			return &LimitError{Limit: "ProductWork", Max: int64(l.ProductWork),
				Detail: fmt.Sprintf("%s: an expression of %d instructions on %d bytes of text", name, len(prog.Inst), len(text))}
		}
		if then != nil {
			return then(l, name, a)
		}
		return nil
	}
}

// replaceAllRule: matches do not overlap, so each group a replacement refers to adds at most the text once;
// a literal replacement is added at most once per position.
func replaceAllRule(expand bool) rule {
	return func(l *Limits, name string, a []reflect.Value) error {
		text, repl := a[1].String(), a[2].String()
		refs := 0
		if expand {
			refs = strings.Count(repl, "$")
		}
		return tooBig(l, name, float64(len(text))+float64(len(text)+1)*float64(len(repl))+float64(refs)*float64(len(text)))
	}
}

// clampArg limits the result count of a function that takes one (regexFindAll, regexSplit, splitn), where a
// negative count means all: to one more part than a value of ValueBytes can hold (each part costs at least 8
// bytes), so that the result check refuses it with the function having allocated no more than that.
func clampArg(i int) rule {
	return func(l *Limits, _ string, a []reflect.Value) error {
		most := int64(l.ValueBytes/8 + 1)
		if n := a[i].Int(); n < 0 || n > most {
			a[i] = reflect.ValueOf(int(most)).Convert(a[i].Type())
		}
		return nil
	}
}

func splitRule(l *Limits, name string, a []reflect.Value) error {
	sep, s := a[0].String(), a[1].String()
	return tooBig(l, name, float64(len(s))+float64(strings.Count(s, sep)+1)*16)
}

// fromYAMLRule: YAML aliases let a small document decode to a large value (the alias limits of the YAML
// library allow a hundredfold expansion of a small document), so YAML input is held to a sixteenth of a value.
func fromYAMLRule(l *Limits, name string, a []reflect.Value) error {
	if n := a[0].Len(); n > l.ValueBytes/16 {
		return &LimitError{Limit: "ValueBytes", Max: int64(l.ValueBytes),
			Detail: fmt.Sprintf("%s of %d bytes: YAML input may be at most a sixteenth of the limit, as aliases expand it", name, n)}
	}
	return nil
}

// uniq compares every element with every element kept so far.
func uniqRule(l *Limits, name string, a []reflect.Value) error {
	n := float64(length(a[0]))
	return pairs(l, name, n*n)
}

func withoutRule(l *Limits, name string, a []reflect.Value) error {
	return pairs(l, name, float64(length(a[0]))*float64(a[1].Len()))
}

// pairs charges comparisons of values (reflect.DeepEqual) against ProductWork at 8 units each.
func pairs(l *Limits, name string, comparisons float64) error {
	if comparisons*8 > float64(l.ProductWork) {
		return &LimitError{Limit: "ProductWork", Max: int64(l.ProductWork),
			Detail: fmt.Sprintf("%s would make %.0f comparisons", name, comparisons)}
	}
	return nil
}

func chunkRule(_ *Limits, _ string, a []reflect.Value) error {
	if a[0].Int() < 1 {
		return fmt.Errorf("chunk size %d: must be at least 1", a[0].Int())
	}
	return nil
}

func elem(v reflect.Value) reflect.Value {
	for v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return reflect.Value{}
		}
		v = v.Elem()
	}
	return v
}

func length(v reflect.Value) int {
	v = elem(v)
	switch v.Kind() {
	case reflect.Slice, reflect.Array, reflect.Map, reflect.String:
		return v.Len()
	}
	return 0
}
