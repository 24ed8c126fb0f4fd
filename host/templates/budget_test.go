package templates

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/Masterminds/sprig/v3"
)

// render executes one template within lim, the way RenderStage executes a file.
func render(ctx context.Context, lim Limits, src string, data any) (string, error) {
	b := newBudget(ctx, lim)
	defer b.close()
	t, err := b.parse(b.newSet("t"), src)
	if err != nil {
		return "", err
	}
	return b.execute(t, data)
}

// TestEveryFunctionIsClassified keeps the budget complete when sprig changes: a function is either removed
// (with the reason), checked by a rule before it runs, or declared linear after review. A new sprig function
// fails this test until someone decides which.
func TestEveryFunctionIsClassified(t *testing.T) {
	sprigs := sprig.TxtFuncMap()
	for name := range removed {
		if _, ok := sprigs[name]; !ok {
			t.Errorf("removed function %q is not in sprig: drop it from the list", name)
		}
		if _, ok := catalog[name]; ok {
			t.Errorf("removed function %q is callable", name)
		}
	}
	for _, name := range functionNames() {
		_, checked := rules[name]
		isLinear := slices.Contains(linear, name)
		if checked == isLinear {
			t.Errorf("function %q must be either in rules or in linear (rule: %v, linear: %v)", name, checked, isLinear)
		}
	}
	for name := range rules {
		if _, ok := catalog[name]; !ok {
			t.Errorf("rule for %q, which templates cannot call", name)
		}
	}
	for _, name := range linear {
		if _, ok := catalog[name]; !ok {
			t.Errorf("linear function %q, which templates cannot call", name)
		}
	}
	for _, name := range []string{"print", "printf", "println", "html", "js", "urlquery"} {
		if _, ok := catalog[name]; !ok {
			t.Errorf("text/template's built-in %q is not wrapped by the budget", name)
		}
	}
}

// TestCancellationStopsALongTemplate: with limits too large to stop it, a template ends promptly when its
// context is cancelled (an admission request whose client gave up), and when the Timeout passes.
func TestCancellationStopsALongTemplate(t *testing.T) {
	lim := DefaultLimits()
	lim.Steps = 1 << 40
	lim.WorkBytes = 1 << 50
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err := render(ctx, lim, `{{ range 1000000000 }}{{ range 1000000000 }}{{ end }}{{ end }}`, nil)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "template execution stopped") {
		t.Fatalf("error = %v", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("stopped %s after the cancellation", took-100*time.Millisecond)
	}

	lim.Timeout = 200 * time.Millisecond
	start = time.Now()
	_, err = render(context.Background(), lim, `{{ define "r" }}{{ range 1000 }}{{ end }}{{ end }}{{ range 1000000000 }}{{ template "r" }}{{ end }}`, nil)
	var le *LimitError
	if !errors.As(err, &le) || le.Limit != "Timeout" {
		t.Fatalf("error = %v", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("took %s with a Timeout of %s", took, lim.Timeout)
	}
}

// TestBudgetKeepsSemantics: what the instrumentation adds prints nothing and changes no value: missing keys,
// nil pointers, break and continue, variables and whitespace trimming behave as in text/template.
func TestBudgetKeepsSemantics(t *testing.T) {
	var nilPtr *string
	data := map[string]any{"m": map[string]string{"a": "1"}, "nil": nilPtr, "list": []int{1, 2, 3, 4}}
	for _, src := range []string{
		`{{ .missing }}|{{ .m.b }}|{{ .nil }}|{{ .m }}`,
		`{{ range $i, $v := .list }}{{ if eq $v 2 }}{{ continue }}{{ end }}{{ if eq $v 4 }}{{ break }}{{ end }}{{ $i }}={{ $v }} {{ end }}`,
		`{{- range 3 }} {{ . }} {{- end }}|{{ range .none }}x{{ else }}empty{{ end }}`,
		`{{ define "d" }}<{{ . }}>{{ end }}{{ template "d" 1 }}{{ block "b" 2 }}[{{ . }}]{{ end }}`,
		`{{ $x := 1 }}{{ $x = add $x 1 }}{{ $x }} {{ with .m }}{{ .a }}{{ end }} {{ printf "%05.1f|%-4s|%x" 3.14159 "ab" "hi" }}`,
		`{{ print 1 "a" }} {{ println "x" }}{{ html "<a>" }} {{ js "'" }} {{ urlquery "a b" }} {{ len .list }} {{ index .list 1 }} {{ slice .list 1 2 }}`,
		`{{ list 1 "a" (dict "k" "v") | toJson }} {{ "a,b" | splitList "," | join "+" }} {{ indent 2 "x\ny" }} {{ seq 3 }} {{ until 3 }}`,
		`{{ regexReplaceAll "(a)(b)" "xabyab" "${2}$1" }} {{ regexFindAll "a" "banana" -1 }} {{ regexSplit "n" "banana" -1 }} {{ splitn "," 2 "a,b,c" }}`,
	} {
		want, err := template.Must(template.New("t").Funcs(sprig.TxtFuncMap()).Parse(src)).Clone()
		if err != nil {
			t.Fatal(err)
		}
		var sb strings.Builder
		if err := want.Execute(&sb, data); err != nil {
			t.Fatalf("%s: unbudgeted: %v", src, err)
		}
		got, err := render(context.Background(), DefaultLimits(), src, data)
		if err != nil {
			t.Errorf("%s: %v", src, err)
			continue
		}
		if got != sb.String() {
			t.Errorf("%s:\n got %q\nwant %q", src, got, sb.String())
		}
	}
}
