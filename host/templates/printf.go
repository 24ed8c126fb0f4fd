package templates

import (
	"reflect"
	"unicode/utf8"
)

// printfRule estimates the length of fmt.Sprintf's result from the format before it runs. A format can make
// fmt allocate far more than its arguments: a width or precision pads every number of a list to up to a
// million characters, and an argument index ([1]) prints one large argument once per verb.
func printfRule(l *Limits, name string, a []reflect.Value) error {
	format, args := a[0].String(), a[1]
	estimate := float64(len(format))
	arg := 0
	for i := 0; i < len(format); {
		if format[i] != '%' {
			i++
			continue
		}
		i++
		mult := 2.0
		for ; i < len(format); i++ {
			switch format[i] {
			case '#':
				mult = 8 // Go syntax names the type of every element
			case ' ':
				mult = max(mult, 3) // "% x" separates bytes
			case '+', '-', '0':
			default:
				goto flagsDone
			}
		}
	flagsDone:
		var width, prec int
		arg, i = argIndex(format, i, arg)
		width, arg, i = number(format, i, args, arg)
		if i < len(format) && format[i] == '.' {
			arg, i = argIndex(format, i+1, arg)
			prec, arg, i = number(format, i, args, arg)
		}
		arg, i = argIndex(format, i, arg)
		if i >= len(format) {
			break
		}
		verb, size := utf8.DecodeRuneInString(format[i:])
		i += size
		if verb == '%' {
			continue
		}
		switch verb {
		case 'b':
			mult = max(mult, 8) // 64 binary digits for a number
		case 'q', 'o', 'O', 'U', 'x', 'X':
			mult = max(mult, 4)
		}
		m := measure{bytes: 16, nodes: 1}
		if arg < args.Len() {
			m = sizeOf(args.Index(arg), l.ValueBytes)
		}
		arg++
		estimate += mult*float64(m.bytes) + float64(width+prec)*float64(m.nodes) + 70
	}
	return tooBig(l, name, estimate)
}

// argIndex reads an explicit argument index, [n], which sets the argument the next verb or star uses.
func argIndex(format string, i, arg int) (int, int) {
	if i >= len(format) || format[i] != '[' {
		return arg, i
	}
	n := 0
	for j := i + 1; j < len(format) && j < i+8; j++ {
		c := format[j]
		switch {
		case c == ']':
			if n > 0 {
				return n - 1, j + 1
			}
			return arg, j + 1
		case c >= '0' && c <= '9':
			n = n*10 + int(c-'0')
		default:
			return arg, i
		}
	}
	return arg, i
}

// fmtMax is the largest width or precision fmt accepts; it ignores larger ones.
const fmtMax = 1_000_000

// number reads a width or precision: digits, or a star that takes the next argument.
func number(format string, i int, args reflect.Value, arg int) (n, nextArg, next int) {
	if i < len(format) && format[i] == '*' {
		if arg < args.Len() {
			n = starValue(elem(args.Index(arg)))
		}
		return n, arg + 1, i + 1
	}
	for ; i < len(format) && format[i] >= '0' && format[i] <= '9'; i++ {
		n = min(n*10+int(format[i]-'0'), fmtMax+1)
	}
	if n > fmtMax {
		n = 0
	}
	return n, arg, i
}

// starValue is the width or precision an argument gives a star, as fmt reads it.
func starValue(v reflect.Value) int {
	switch {
	case v.CanInt():
		x := v.Int()
		if x < 0 {
			x = -x
		}
		if x < 0 || x > fmtMax {
			return fmtMax
		}
		return int(x)
	case v.CanUint():
		return int(min(v.Uint(), fmtMax))
	}
	return 0
}
