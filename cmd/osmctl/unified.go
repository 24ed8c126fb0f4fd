package main

import (
	"fmt"
	"strings"
)

// diffContext is the number of unchanged lines shown around a change, as in diff -u.
const diffContext = 3

// maxEditDistance bounds the Myers search (its memory grows with the square of the edit distance). Texts
// further apart than this are shown as a removal of all of a and an addition of all of b, which is correct,
// only not minimal.
const maxEditDistance = 2000

type edit struct {
	op   byte // ' ' unchanged, '-' only in a, '+' only in b
	line string
}

// unifiedDiff returns the unified diff turning a into b, with the given labels in its ---/+++ header, or ""
// when a and b are equal.
func unifiedDiff(fromLabel, toLabel, a, b string) string {
	if a == b {
		return ""
	}
	edits := lineEdits(splitLines(a), splitLines(b))
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", fromLabel, toLabel)
	for _, h := range hunks(edits) {
		writeHunk(&out, edits, h[0], h[1])
	}
	return out.String()
}

// splitLines splits s after each newline; a last line without one keeps no newline.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// lineEdits is a shortest edit script from a to b: the common prefix and suffix, and Myers' algorithm for
// what lies between.
func lineEdits(a, b []string) []edit {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	out := make([]edit, 0, len(a)+len(b))
	for _, l := range a[:pre] {
		out = append(out, edit{' ', l})
	}
	out = append(out, myers(a[pre:len(a)-suf], b[pre:len(b)-suf])...)
	for _, l := range a[len(a)-suf:] {
		out = append(out, edit{' ', l})
	}
	return out
}

// myers implements E. Myers, "An O(ND) Difference Algorithm and Its Variations" (1986), keeping for each
// edit distance d the furthest-reaching x of every diagonal k = x - y, and walking those back from the end.
func myers(a, b []string) []edit {
	n, m := len(a), len(b)
	limit := min(n+m, maxEditDistance)
	off := limit + 1
	v := make([]int, 2*limit+3)
	var trace [][]int // trace[d][k+d] is v[k] as it was before round d
	for d := 0; d <= limit; d++ {
		trace = append(trace, append([]int(nil), v[off-d:off+d+1]...))
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = v[off+k+1] // down: an insertion
			} else {
				x = v[off+k-1] + 1 // right: a deletion
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x, y = x+1, y+1
			}
			v[off+k] = x
			if x >= n && y >= m {
				return backtrack(a, b, trace, d)
			}
		}
	}
	out := make([]edit, 0, n+m)
	for _, l := range a {
		out = append(out, edit{'-', l})
	}
	for _, l := range b {
		out = append(out, edit{'+', l})
	}
	return out
}

func backtrack(a, b []string, trace [][]int, dist int) []edit {
	var rev []edit
	x, y := len(a), len(b)
	for d := dist; d > 0; d-- {
		vd := trace[d]
		k := x - y
		prevK := k - 1
		if k == -d || (k != d && vd[k-1+d] < vd[k+1+d]) {
			prevK = k + 1
		}
		prevX := vd[prevK+d]
		prevY := prevX - prevK
		for x > prevX && y > prevY {
			rev = append(rev, edit{' ', a[x-1]})
			x, y = x-1, y-1
		}
		if x == prevX {
			rev = append(rev, edit{'+', b[y-1]})
		} else {
			rev = append(rev, edit{'-', a[x-1]})
		}
		x, y = prevX, prevY
	}
	for x > 0 && y > 0 {
		rev = append(rev, edit{' ', a[x-1]})
		x, y = x-1, y-1
	}
	out := make([]edit, len(rev))
	for i, e := range rev {
		out[len(rev)-1-i] = e
	}
	return out
}

// hunks groups the changes into [start, end) ranges of edits with diffContext unchanged lines around them,
// merging changes that are at most 2*diffContext unchanged lines apart.
func hunks(edits []edit) [][2]int {
	var out [][2]int
	for i := 0; i < len(edits); {
		if edits[i].op == ' ' {
			i++
			continue
		}
		start := max(0, i-diffContext)
		end := i + 1
		for k := i; k < len(edits); k++ {
			if edits[k].op != ' ' {
				end = k + 1
			} else if k-end+1 > 2*diffContext {
				break
			}
		}
		stop := min(len(edits), end+diffContext)
		out = append(out, [2]int{start, stop})
		i = stop
	}
	return out
}

func writeHunk(out *strings.Builder, edits []edit, start, stop int) {
	aStart, bStart := 0, 0
	for _, e := range edits[:start] {
		if e.op != '+' {
			aStart++
		}
		if e.op != '-' {
			bStart++
		}
	}
	aLen, bLen := 0, 0
	for _, e := range edits[start:stop] {
		if e.op != '+' {
			aLen++
		}
		if e.op != '-' {
			bLen++
		}
	}
	fmt.Fprintf(out, "@@ -%s +%s @@\n", hunkRange(aStart, aLen), hunkRange(bStart, bLen))
	for _, e := range edits[start:stop] {
		out.WriteByte(e.op)
		out.WriteString(e.line)
		if !strings.HasSuffix(e.line, "\n") {
			out.WriteString("\n\\ No newline at end of file\n")
		}
	}
}

// hunkRange formats a hunk's line range as diff -u does: "start,count", "start" for one line, and for no
// lines the line before the hunk with count 0.
func hunkRange(start, n int) string {
	switch n {
	case 0:
		return fmt.Sprintf("%d,0", start)
	case 1:
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}
