package templates_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	osmv1alpha1 "github.com/osmhq/osm/crds/osm/v1alpha1"
	"github.com/osmhq/osm/host/templates"
)

// contained renders one file template through RenderStage and checks the attack was stopped by the named
// limit with an error that names the field, the template and its line, within a generous time and memory
// bound (the process would otherwise die of an out-of-memory error or run for minutes). An empty limit is an
// argument refused as wrong rather than as too large.
func contained(t *testing.T, src string, data any, limit, where string) {
	t.Helper()
	cfg := &osmv1alpha1.OSPConfig{Files: []osmv1alpha1.File{file("/etc/ok", "fine"), file("/etc/attack", src)}}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	_, err := templates.RenderStage(context.Background(), "spec.provisioningConfig", cfg, "containerd", data)
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Fatal("rendered")
	}
	var le *templates.LimitError
	if limit != "" && (!errors.As(err, &le) || le.Limit != limit) {
		t.Fatalf("error is not the %s limit: %v", limit, err)
	}
	msg := err.Error()
	wants := []string{"spec.provisioningConfig.files[1].content.inline.data (/etc/attack)", where}
	if limit != "" {
		wants = append(wants, "over the "+limit+" limit")
	}
	for _, want := range wants {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not say %q:\n%s", want, msg)
		}
	}
	if took > 10*time.Second {
		t.Errorf("took %s", took)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 256<<20 {
		t.Errorf("allocated %d MiB", alloc>>20)
	}
	t.Logf("%s in %s, %d MiB allocated: %s", limit, took.Round(time.Millisecond), (after.TotalAlloc-before.TotalAlloc)>>20, msg)
}

// TestAttacksAreContained replays the templates that killed or stalled the controller, and the classes they
// stand for, through the real engine.
func TestAttacksAreContained(t *testing.T) {
	chain := func(n int, leaf string) string {
		var b strings.Builder
		fmt.Fprintf(&b, `{{ define "a0" }}%s{{ end }}`, leaf)
		for i := 1; i <= n; i++ {
			fmt.Fprintf(&b, `{{ define "a%d" }}{{ template "a%d" }}{{ template "a%d" }}{{ end }}`, i, i-1, i-1)
		}
		fmt.Fprintf(&b, `{{ template "a%d" }}`, n)
		return b.String()
	}
	aliased := `{{ $d := dict }}{{ $l := list $d $d $d $d $d $d $d $d }}` +
		`{{ $l = list $l $l $l $l $l $l $l $l }}{{ $l = list $l $l $l $l $l $l $l $l }}{{ $l = list $l $l $l $l $l $l $l $l }}` +
		`{{ $_ := set $d "k" (repeat 1000000 "x") }}`
	for _, tc := range []struct {
		name, src, limit, where string
	}{
		{"repeat 3e9", `{{ repeat 3000000000 "x" }}`, "ValueBytes", `/etc/attack:1:3: executing "/etc/attack" at <repeat 3000000000 "x">`},
		{"repeat piped", `{{ "xyz" | repeat 1000000 }}`, "ValueBytes", "/etc/attack:1:11"},
		{"seq huge", "line\n{{ seq 1000000000 }}", "ValueBytes", "/etc/attack:2:3"},
		{"seq huge steps", `{{ seq 0 1 2000000000 }}`, "ValueBytes", "seq"},
		{"until huge", `{{ range until 1000000000 }}{{ end }}`, "ValueBytes", "until"},
		{"untilStep huge", `{{ untilStep 0 9000000000000000000 2 }}`, "ValueBytes", "untilStep"},
		{"untilStep overflowing", `{{ untilStep 0 9223372036854775807 4611686018427387904 }}`, "", "overflows the integers and never ends"},
		{"untilStep overflowing down", `{{ untilStep 0 -9223372036854775808 -4611686018427387904 }}`, "", "overflows the integers"},
		{"seq overflowing", `{{ seq 0 4611686018427387904 9223372036854775806 }}`, "", "seq from 0 to 9223372036854775807 by 4611686018427387904 overflows"},
		{"indent huge", `{{ indent 1000 (repeat 1000000 "\n") }}`, "ValueBytes", "indent"},
		{"nindent huge", `{{ repeat 1000 "ab\n" | nindent 100000 }}`, "ValueBytes", "nindent"},
		{"replace empty", `{{ replace "" (repeat 10000 "y") (repeat 10000 "x") }}`, "ValueBytes", "replace"},
		{"join large separator", `{{ join (repeat 1000000 "x") (until 60000) }}`, "ValueBytes", "join"},
		{"wrapWith large separator", `{{ wrapWith 1 (repeat 100000 "-") (repeat 100000 "x") }}`, "ValueBytes", "wrapWith"},
		{"cat of many copies", `{{ $s := repeat 600000 "x" }}{{ cat $s $s }}`, "ValueBytes", "arguments of cat"},
		{"printf doubling in a loop", `{{ $s := "x" }}{{ range 100 }}{{ $s = printf "%s%s" $s $s }}{{ end }}{{ $s }}`, "ValueBytes", "printf"},
		{"printf width", `{{ printf "%1000000d%1000000d" 1 2 }}`, "ValueBytes", "printf"},
		{"printf star width", `{{ printf "%*d%*d" 1000000 1 1000000 2 }}`, "ValueBytes", "printf"},
		{"printf pads every element", `{{ printf "%90000v" (until 1000) }}`, "ValueBytes", "printf"},
		{"printf argument index", `{{ printf "%[1]s%[1]s%[1]s" (repeat 500000 "x") }}`, "ValueBytes", "printf"},
		{"print of many copies", `{{ $s := repeat 600000 "x" }}{{ print $s $s }}`, "ValueBytes", "print"},
		{"regex program times text", `{{ regexMatch (repeat 1000 "a?") (repeat 100000 "a") }}`, "ProductWork", "regexMatch"},
		{"regexReplaceAll empty match", `{{ regexReplaceAll "" (repeat 100000 "x") (repeat 10000 "y") }}`, "ValueBytes", "regexReplaceAll"},
		{"regexFindAll every position", `{{ regexFindAll "" (repeat 1000000 "x") -1 }}`, "ValueBytes", "regexFindAll"},
		{"splitList every rune", `{{ splitList "" (repeat 1000000 "x") }}`, "ValueBytes", "splitList"},
		{"uniq quadratic", `{{ uniq (until 50000) }}`, "ProductWork", "uniq"},
		{"nested ranges without output", `{{ range 100000 }}{{ range 100000 }}{{ end }}{{ end }}`, "Steps", "/etc/attack:1:27: executing \"/etc/attack\" at <osmRangeStep>"},
		{"nested ranges over lists", `{{ $l := until 50000 }}{{ range $l }}{{ range $l }}{{ end }}{{ end }}`, "Steps", "osmRangeStep"},
		{"range 1e9", `{{ range 1000000000 }}{{ end }}`, "Steps", "osmRangeStep"},
		{"range 1e9 with a function", `{{ range $i := 1000000000 }}{{ $x := add $i 1 }}{{ end }}`, "Steps", "/etc/attack"},
		{"exponential define chain", chain(60, ""), "Steps", "osmTemplateEnter"},
		{"exponential define chain with output", chain(60, strings.Repeat("x", 1000)), "OutputBytes", "/etc/attack"},
		{"deep recursion", `{{ define "r" }}{{ template "r" . }}{{ end }}{{ template "r" . }}`, "CallDepth", "osmTemplateEnter"},
		{"output of a loop", `{{ range 10000 }}{{ repeat 1000 "x" }}{{ end }}`, "OutputBytes", "/etc/attack:1:20: executing \"/etc/attack\" at <osmPrintCheck>"},
		{"printing an aliased map", aliased + `{{ $l }}`, "OutputBytes", "osmPrintCheck"},
		{"serializing an aliased map", aliased + `{{ toJson $l }}`, "ValueBytes", "arguments of toJson"},
		{"map holding itself", `{{ $d := dict }}{{ $_ := set $d "self" $d }}{{ $d }}`, "ValueBytes", "set built"},
		{"deeply nested list", `{{ $l := list }}{{ range 100 }}{{ $l = list $l }}{{ end }}{{ toJson $l }}`, "ValueDepth", "an argument of list nests 33 levels deep"},
		{"deeply nested control structures", "x\n" + strings.Repeat("{{ if 1 }}", 190000) + strings.Repeat("{{ end }}", 190000), "Nesting", "/etc/attack: line 2"},
		{"else-if chain", "{{ if 0 }}" + strings.Repeat("{{ else if 0 }}", 190000) + "{{ end }}", "Nesting", "/etc/attack: line 1"},
		{"nesting hidden behind fields named end", strings.Repeat("{{ with 1 }}{{ .end }}", 1000) + strings.Repeat("{{ end }}", 1000), "Nesting", "/etc/attack"},
		{"nested parentheses", "{{ " + strings.Repeat("(", 5000) + "1" + strings.Repeat(")", 5000) + " }}", "Nesting", "/etc/attack"},
	} {
		t.Run(tc.name, func(t *testing.T) { contained(t, tc.src, nil, tc.limit, tc.where) })
	}
}

// TestYAMLAliasBomb: a small YAML document whose aliases expand a billionfold ("billion laughs") is refused by
// the YAML library's alias limit or by the size of the value it decodes to, without expanding it.
func TestYAMLAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i <= 9; i++ {
		fmt.Fprintf(&b, "a%d: &a%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d, ", i-1), 10), ", "))
	}
	contained(t, `{{ fromYaml .doc | toJson }}`, map[string]string{"doc": b.String()}, "", "fromYaml")
}

// TestMachineDeploymentNameBranch: a template that is harmless for the admission's sample machine and blows
// up for one MachineDeployment fails that render with the template error; the next render is unaffected.
func TestMachineDeploymentNameBranch(t *testing.T) {
	src := `{{ if eq .MachineDeploymentName "victim" }}{{ repeat 3000000000 "x" }}{{ else }}ok{{ end }}`
	cfg := &osmv1alpha1.OSPConfig{Files: []osmv1alpha1.File{file("/etc/x", src)}}
	type data struct{ MachineDeploymentName string }
	if _, err := templates.RenderStage(context.Background(), "s", cfg, "containerd", data{"victim"}); err == nil || !strings.Contains(err.Error(), "ValueBytes") {
		t.Fatalf("victim: %v", err)
	}
	out, err := templates.RenderStage(context.Background(), "s", cfg, "containerd", data{"other"})
	if err != nil || out.Files[0].Content.Inline.Data != "ok" {
		t.Fatalf("other: %v", err)
	}
}

func TestStageOutputLimit(t *testing.T) {
	var files []osmv1alpha1.File
	for i := range 6 {
		files = append(files, file(fmt.Sprintf("/f%d", i), `{{ repeat 900000 "x" }}`))
	}
	_, err := templates.RenderStage(context.Background(), "s", &osmv1alpha1.OSPConfig{Files: files}, "containerd", nil)
	var le *templates.LimitError
	if !errors.As(err, &le) || le.Limit != "StageOutputBytes" || !strings.Contains(err.Error(), "s.files[4]") {
		t.Fatalf("error = %v", err)
	}
}

func TestCanceledContextStopsRendering(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cfg := &osmv1alpha1.OSPConfig{Files: []osmv1alpha1.File{file("/f", "{{ range 10 }}x{{ end }}")}}
	_, err := templates.RenderStage(ctx, "s", cfg, "containerd", nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error = %v", err)
	}
}

// TestDatesAreUTC: date functions give the same output whatever the controller's time zone.
func TestDatesAreUTC(t *testing.T) {
	local := time.Local
	time.Local = time.FixedZone("CONTROLLER", 5*3600+1800)
	defer func() { time.Local = local }()
	for _, tc := range []struct{ src, want string }{
		{`{{ date "2006-01-02 15:04 MST" 0 }}`, "1970-01-01 00:00 UTC"},
		{`{{ date "15:04 MST" (toDate "2006-01-02 15:04" "2024-03-01 10:30") }}`, "10:30 UTC"},
		{`{{ toDate "2006-01-02" "2024-03-01" }}`, "2024-03-01 00:00:00 +0000 UTC"},
		{`{{ (mustToDate "2006-01-02" "2024-03-01") | unixEpoch }}`, "1709251200"},
		{`{{ dateInZone "15:04 MST" 3600 "Local" }}`, "01:00 UTC"},
		{`{{ htmlDate 86400 }} {{ htmlDateInZone 86400 "UTC" }}`, "1970-01-02 1970-01-02"},
		{`{{ toDate "2006-01-02" "2024-03-01" | dateModify "36h" | date "2006-01-02T15" }}`, "2024-03-02T12"},
		{`{{ durationRound "49h" }} {{ duration "90" }}`, "2d 1m30s"},
	} {
		out, err := templates.RenderStage(context.Background(), "s", &osmv1alpha1.OSPConfig{Files: []osmv1alpha1.File{file("/d", tc.src)}}, "containerd", nil)
		if err != nil {
			t.Errorf("%s: %v", tc.src, err)
			continue
		}
		if got := out.Files[0].Content.Inline.Data; got != tc.want {
			t.Errorf("%s = %q, want %q", tc.src, got, tc.want)
		}
	}
}

// TestClockIsRefused: nothing a template calls reads the clock, the environment or randomness.
func TestClockIsRefused(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{`{{ now }}`, `function "now" not defined`},
		{`{{ ago 0 }}`, `function "ago" not defined`},
		{`{{ date "2006" "" }}`, "cannot read the clock"},
		{`{{ date "2006" nil }}`, "cannot read the clock"},
		{`{{ htmlDate "x" }}`, "cannot read the clock"},
		{`{{ dateInZone "2006" "now" "UTC" }}`, "cannot read the clock"},
		{`{{ dateInZone "2006" 0 "Europe/Berlin" }}`, "only UTC"},
		{`{{ durationRound (toDate "2006" "2020") }}`, "would read the clock"},
		{`{{ env "HOME" }}`, `function "env" not defined`},
		{`{{ randAlpha 3 }}`, `function "randAlpha" not defined`},
		{`{{ uuidv4 }}`, `function "uuidv4" not defined`},
		{`{{ getHostByName "example.com" }}`, `function "getHostByName" not defined`},
	} {
		_, err := templates.RenderStage(context.Background(), "s", &osmv1alpha1.OSPConfig{Files: []osmv1alpha1.File{file("/d", tc.src)}}, "containerd", nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error = %v, want %q", tc.src, err, tc.want)
		}
	}
}
