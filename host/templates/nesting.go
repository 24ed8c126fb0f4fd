package templates

import (
	"fmt"
	"strings"
)

// checkNesting refuses template source whose control structures ({{ if }}, {{ range }}, {{ with }},
// {{ define }}, {{ block }} and else-if chains) and parentheses nest deeper than max, before text/template
// parses it: its parser recurses once per level, and 190,000 nested {{ if }} in 1.5 MB of source take 256 MiB
// of stack to parse. The scan follows text/template's lexer: actions between {{ and }}, comments, and quoted,
// raw and character strings inside actions.
func checkNesting(src string, max int) error {
	var open []int // per open block: the levels it adds (1, plus one per else-if)
	depth := 0
	for i := 0; ; {
		j := strings.Index(src[i:], "{{")
		if j < 0 {
			return nil
		}
		start := i + j
		i = start + 2
		if strings.HasPrefix(src[i:], "- ") || strings.HasPrefix(src[i:], "-\t") || strings.HasPrefix(src[i:], "-\n") || strings.HasPrefix(src[i:], "-\r") {
			i++
		}
		i = skipSpace(src, i)
		if strings.HasPrefix(src[i:], "/*") {
			k := strings.Index(src[i:], "*/")
			if k < 0 {
				return nil // the parser reports the unclosed comment
			}
			i += k + 2
			continue
		}
		words, parens, next := scanAction(src, i)
		i = next
		switch {
		case words[0] == "if" || words[0] == "range" || words[0] == "with" || words[0] == "define" || words[0] == "block":
			open = append(open, 1)
			depth++
		case len(words) > 1 && words[0] == "else" && (words[1] == "if" || words[1] == "with") && len(open) > 0:
			open[len(open)-1]++
			depth++
		case words[0] == "end" && len(open) > 0:
			depth -= open[len(open)-1]
			open = open[:len(open)-1]
		}
		if depth+parens > max {
			return &LimitError{Limit: "Nesting", Max: int64(max),
				Detail: fmt.Sprintf("line %d: control structures and parentheses nest too deeply", 1+strings.Count(src[:start], "\n"))}
		}
		if i >= len(src) {
			return nil
		}
	}
}

// scanAction reads an action from i to its closing }}: its keywords (its first token, and the second when
// the first is else), the deepest nesting of its parentheses, and the index after it.
func scanAction(src string, i int) (words []string, maxParens, next int) {
	first, i := token(src, i)
	words = append(words, first)
	if first == "else" {
		var second string
		second, i = token(src, skipSpace(src, i))
		words = append(words, second)
	}
	parens := 0
	for i < len(src) {
		switch c := src[i]; {
		case strings.HasPrefix(src[i:], "}}"):
			return words, maxParens, i + 2
		case c == '"' || c == '\'' || c == '`':
			i = skipQuoted(src, i)
			continue
		case c == '(':
			parens++
			maxParens = max(maxParens, parens)
		case c == ')':
			parens--
		}
		i++
	}
	return words, maxParens, i
}

// token reads the identifier at i, which is empty when the action starts with anything else.
func token(src string, i int) (string, int) {
	j := i
	for j < len(src) && (src[j] == '_' || src[j] >= 'a' && src[j] <= 'z' || src[j] >= 'A' && src[j] <= 'Z' || src[j] >= '0' && src[j] <= '9') {
		j++
	}
	return src[i:j], j
}

func skipQuoted(src string, i int) int {
	quote := src[i]
	for i++; i < len(src); i++ {
		switch src[i] {
		case '\\':
			if quote != '`' {
				i++
			}
		case quote:
			return i + 1
		}
	}
	return i
}

func skipSpace(src string, i int) int {
	for i < len(src) && (src[i] == ' ' || src[i] == '\t' || src[i] == '\n' || src[i] == '\r') {
		i++
	}
	return i
}
