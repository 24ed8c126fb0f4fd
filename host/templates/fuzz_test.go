package templates

import (
	"context"
	"errors"
	"runtime/metrics"
	"strings"
	"testing"
	"time"
)

// FuzzTemplate parses and executes arbitrary template source on data from the fuzzer within the default
// budget. Whatever the template, the execution must end with its output or an error: no panic escapes, no
// output passes the limit, no input takes more than a few seconds or allocates more than 512 MiB (the process
// would die of it in the controller). Crashers found become regression cases in testdata/fuzz.
func FuzzTemplate(f *testing.F) {
	for _, seed := range []string{
		`{{ repeat 3000000000 "x" }}`,
		`{{ range 100000 }}{{ range 100000 }}{{ end }}{{ end }}`,
		`{{ define "a" }}{{ template "b" }}{{ template "b" }}{{ end }}{{ define "b" }}{{ .S }}{{ end }}{{ template "a" . }}`,
		`{{ $s := .S }}{{ range .N }}{{ $s = printf "%s%s" $s $s }}{{ end }}{{ $s }}`,
		`{{ indent .N .S }}{{ nindent 4 (toYaml .M) }}{{ .L | toJson }}`,
		`{{ seq .N }} {{ until .N }} {{ untilStep 0 .N 3 }}`,
		`{{ $d := dict }}{{ $_ := set $d "x" $d }}{{ $d }}`,
		`{{ regexReplaceAll .S "banana" "${1}x" }} {{ regexFindAll .S "aaaa" .N }}`,
		`{{ printf .S .N .S .L }}`,
		`{{ date "2006-01-02" .N }} {{ toDate "2006" .S | date "15:04" }}`,
		`{{ if eq .S "x" }}{{ fromYaml .S | toToml }}{{ else }}{{ fromJson .S | toPrettyJson }}{{ end }}`,
		`{{- range $k, $v := .M }}{{ $k }}={{ $v | quote }}{{ end -}}`,
		`{{ join .S (splitList "," .S) }} {{ replace "a" .S .S }} {{ wrapWith .N "-" .S }}`,
		`{{ block "x" . }}{{ with .L }}{{ index . 0 }}{{ end }}{{ end }}`,
	} {
		f.Add(seed, "a,b: [1, {c: d}]", 3)
	}
	allocs := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	f.Fuzz(func(t *testing.T, src, s string, n int) {
		data := map[string]any{"S": s, "N": n, "L": []any{s, n, []string{s}}, "M": map[string]any{"k": s, "n": n}}
		lim := DefaultLimits()
		metrics.Read(allocs)
		before := allocs[0].Value.Uint64()
		start := time.Now()
		out, err := render(context.Background(), lim, src, data)
		took := time.Since(start)
		metrics.Read(allocs)
		if alloc := allocs[0].Value.Uint64() - before; alloc > 512<<20 {
			t.Fatalf("allocated %d MiB (error %v)", alloc>>20, err)
		}
		if took > lim.Timeout+5*time.Second {
			t.Fatalf("took %s (error %v)", took, err)
		}
		if err == nil && len(out) > lim.OutputBytes {
			t.Fatalf("output of %d bytes", len(out))
		}
		var le *LimitError
		if err != nil && errors.As(err, &le) && !strings.Contains(err.Error(), le.Limit) {
			t.Fatalf("a limit error that does not name its limit: %v", err)
		}
	})
}
