package main

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestUnifiedDiff(t *testing.T) {
	tests := []struct {
		name string
		a, b string
		want string
	}{
		{name: "equal", a: "x\ny\n", b: "x\ny\n", want: ""},
		{name: "added file", a: "", b: "one\ntwo\n", want: "--- a\n+++ b\n@@ -0,0 +1,2 @@\n+one\n+two\n"},
		{name: "removed file", a: "one\n", b: "", want: "--- a\n+++ b\n@@ -1 +0,0 @@\n-one\n"},
		{
			name: "change in the middle, three lines of context",
			a:    "1\n2\n3\n4\n5\n6\n7\n8\n9\n",
			b:    "1\n2\n3\n4\nfive\n6\n7\n8\n9\n",
			want: "--- a\n+++ b\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n",
		},
		{
			name: "changes far apart make two hunks",
			a:    "a\n1\n2\n3\n4\n5\n6\n7\nb\n",
			b:    "A\n1\n2\n3\n4\n5\n6\n7\nB\n",
			want: "--- a\n+++ b\n@@ -1,4 +1,4 @@\n-a\n+A\n 1\n 2\n 3\n@@ -6,4 +6,4 @@\n 5\n 6\n 7\n-b\n+B\n",
		},
		{
			name: "changes six lines apart share a hunk",
			a:    "a\n1\n2\n3\n4\n5\n6\nb\n",
			b:    "A\n1\n2\n3\n4\n5\n6\nB\n",
			want: "--- a\n+++ b\n@@ -1,8 +1,8 @@\n-a\n+A\n 1\n 2\n 3\n 4\n 5\n 6\n-b\n+B\n",
		},
		{
			name: "missing final newline",
			a:    "x\ny",
			b:    "x\nz",
			want: "--- a\n+++ b\n@@ -1,2 +1,2 @@\n x\n-y\n\\ No newline at end of file\n+z\n\\ No newline at end of file\n",
		},
		{
			name: "insertion keeps the common lines",
			a:    "kubelet\ncontainerd\n",
			b:    "kubelet\nchrony\ncontainerd\n",
			want: "--- a\n+++ b\n@@ -1,2 +1,3 @@\n kubelet\n+chrony\n containerd\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := unifiedDiff("a", "b", tt.a, tt.b); got != tt.want {
				t.Errorf("unifiedDiff() =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

// TestLineEditsAreMinimal compares the edit scripts with the longest common subsequence on random texts:
// applying a script must give b, and it must keep as many lines as the LCS has.
func TestLineEditsAreMinimal(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"a\n", "b\n", "c\n", "d\n"}
	randomText := func() []string {
		out := make([]string, rng.IntN(30))
		for i := range out {
			out[i] = words[rng.IntN(len(words))]
		}
		return out
	}
	for i := range 500 {
		a, b := randomText(), randomText()
		edits := lineEdits(a, b)
		var gotA, gotB []string
		kept := 0
		for _, e := range edits {
			if e.op != '+' {
				gotA = append(gotA, e.line)
			}
			if e.op != '-' {
				gotB = append(gotB, e.line)
			}
			if e.op == ' ' {
				kept++
			}
		}
		if strings.Join(gotA, "") != strings.Join(a, "") || strings.Join(gotB, "") != strings.Join(b, "") {
			t.Fatalf("case %d: the script does not turn %q into %q: %v", i, a, b, edits)
		}
		if want := lcs(a, b); kept != want {
			t.Fatalf("case %d: the script keeps %d lines, the LCS has %d (%q, %q)", i, kept, want, a, b)
		}
	}
}

func lcs(a, b []string) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for i := range a {
		for j := range b {
			if a[i] == b[j] {
				cur[j+1] = prev[j] + 1
			} else {
				cur[j+1] = max(prev[j+1], cur[j])
			}
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// TestUnifiedDiffFarApart checks the fallback for texts beyond the edit distance bound.
func TestUnifiedDiffFarApart(t *testing.T) {
	var a, b strings.Builder
	for i := range maxEditDistance + 10 {
		a.WriteString("a" + string(rune('0'+i%10)) + "\n")
		b.WriteString("b" + string(rune('0'+i%10)) + "\n")
	}
	got := unifiedDiff("a", "b", a.String(), b.String())
	n := maxEditDistance + 10
	header := fmt.Sprintf("--- a\n+++ b\n@@ -1,%d +1,%d @@\n-a0\n", n, n)
	if !strings.HasPrefix(got, header) || strings.Count(got, "\n-") != n || strings.Count(got, "\n+") != n+1 {
		t.Errorf("unexpected diff of unrelated texts (%d bytes): %.200s", len(got), got)
	}
}
