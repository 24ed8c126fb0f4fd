package hack

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// sleepSite is a function of a _test.go file that calls time.Sleep: the file's path from the repository's top
// directory, with slashes, and the function's name (Type.Method for a method; a function literal counts as the
// declaration it is written in).
type sleepSite struct{ file, fn string }

// allowedSleep says why a sleep stays and how many the function has, so a second one in an allowed function
// fails as well.
type allowedSleep struct {
	n      int
	reason string
}

// allowedSleeps are the only functions of a _test.go file that may call time.Sleep: the polling helpers (a
// wait for a condition lives in them, nowhere else) and sleeps that are the behaviour under test or a
// measurement's sampling interval, never a wait for another goroutine to have probably done something.
var allowedSleeps = map[sleepSite]allowedSleep{
	// Polling helpers: a wait for a condition, bounded, that sleeps between looks.
	{"sdk/runtime/hostile_test.go", "waitForGoroutines"}:           {1, "polling helper: the goroutines a test started end (the sdk module cannot import host/testenv)"},
	{"host/e2e/node_test.go", "node.waitUntil"}:                    {1, "node e2e polling helper: a booted node's units reach a state"},
	{"host/e2e/nodereport_test.go", "phaseRecorder.waitFor"}:       {1, "node e2e polling helper: a machine reports a bootstrap phase"},
	{"host/e2e/cluster_test.go", "cluster.userData"}:               {1, "node e2e polling helper: the user-data Secrets are written (its failure shows the OSC's status)"},
	{"host/e2e/main_test.go", "recoverStaleRun"}:                   {1, "node e2e cleanup: a killed cgroup empties, at most 5 s"},
	{"host/e2e/node_test.go", "removeCgroup"}:                      {1, "node e2e cleanup: a killed cgroup empties, at most 5 s"},
	{"host/e2e/machinecontroller/harness_test.go", "registerNode"}: {1, "retry of a status update that met a conflict"},
	{"host/app/bench_cluster_test.go", "watchBootstrapSecrets"}:    {1, "benchmark: backs off before re-opening a watch the API server refused"},
	{"host/app/throughput_bench_test.go", "settleWrites"}:          {1, "benchmark: polls the API server's write count until it stops growing"},
	{"host/app/throughput_bench_test.go", "saveStartTrace"}:        {1, "benchmark: polls the controller's pprof endpoint until it answers"},

	// The sleep is what the test measures or exercises.
	{"host/render/budget_test.go", "peakHeap"}:                                            {1, "the sampling interval of a heap probe running beside the render it measures"},
	{"sdk/runtime/unload_test.go", "TestUnloadedModulesFreeTheirCompiledCode"}:            {1, "spaces the heap samples whose least value is the measurement"},
	{"host/controllers/osc/await_integration_test.go", "laggingBody.Read"}:                {1, "the behaviour under test: watch events that reach the informer cache late"},
	{"host/app/refusedwrite_integration_test.go", "TestRefusedWriteBacksOffAndIsVisible"}: {1, "the behaviour under test: the reconciles over a refusal window, bounded by the backoff at every second of it"},
	{"host/app/throughput_bench_test.go", "runBench"}:                                     {1, "benchmark: the idle window whose writes it reports"},

	// Absence windows, one helper per package: the test asserts that nothing happens in them (no write, no
	// rollout). A window too short for the controller only lets a bug pass; it never fails a correct one.
	{"host/app/helpers_test.go", "absenceWindow"}:                                      {1, "absence window: no write, no rollout"},
	{"host/controllers/rollout/rollout_integration_test.go", "fixture.absenceWindow"}:  {1, "absence window: no rollout starts, a rolling one keeps rolling"},
	{"host/e2e/machinecontroller/rollout_test.go", "TestRolloutWithMachineController"}: {1, "absence window: no further rollout starts"},

	// host/plugin and host/pluginhost.
	{"host/plugin/lazy_test.go", "waitFor"}:                             {1, "polling helper: a condition, with a deadline"},
	{"host/pluginhost/supervisor_test.go", "waitFor"}:                   {1, "polling helper: a condition, with a deadline"},
	{"host/pluginhost/supervisor_test.go", "TestDeadlinesCountCPUTime"}: {1, "the stimulus: the stopped host gets no CPU for twice the call's CPU budget"},
	{"host/pluginhost/supervisor_test.go", "TestQuarantine"}:            {1, "polls until the quarantine expires, with a deadline"},
	{"host/pluginhost/supervisor_test.go", "TestAnIdleHostStops"}:       {1, "polls until the idle host has stopped, with a deadline"},
}

// TestNoSleepsOrderTests: no _test.go file of the repository calls time.Sleep outside allowedSleeps. A test
// that waits for another goroutine waits for its signal (a channel, a hook, its completion) or polls a
// condition through a helper; a sleep that "probably" is long enough passes on a fast machine and flakes on a
// loaded one. An allowed function that no longer sleeps fails too, so the table stays the list of sleeps.
func TestNoSleepsOrderTests(t *testing.T) {
	for _, problem := range checkSleeps(t, "..", allowedSleeps) {
		t.Error(problem)
	}
}

// TestSleepCheckFindsSleeps runs the check on a fixture tree: a sleep added to a new function, a second sleep
// in an allowed function, a sleep through a renamed or dot import and a bare wait for time.After fail; an
// allowed sleep, a method's, a Sleep of something other than package time, a time.After in a select and a sleep
// outside _test.go files or in testdata pass; an allowed function without its sleep is reported stale.
func TestSleepCheckFindsSleeps(t *testing.T) {
	root := t.TempDir()
	write := func(path, src string) {
		t.Helper()
		full := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("a/a_test.go", `package a

import "time"

type clock struct{}

func (clock) Sleep(time.Duration) {}

func poll() { time.Sleep(time.Millisecond) }

func TestTwice(t *testing.T) {
	go func() { time.Sleep(time.Second) }()
	time.Sleep(time.Second)
}

func (f *fixture) wait() { time.Sleep(1) }

func TestOtherSleep(t *testing.T) { clock{}.Sleep(time.Second) }
`)
	write("b/b_test.go", `package b

import tm "time"

func TestRenamed(t *testing.T) { tm.Sleep(tm.Second) }
`)
	write("d/d_test.go", `package d

import . "time"

func TestDot(t *testing.T) { Sleep(Second) }

func TestAfter(t *testing.T) {
	<-After(Second)
	select {
	case <-After(Second):
		Sleep(Second)
	default:
	}
}

func TestSelect(t *testing.T) {
	select {
	case <-After(Second):
	default:
	}
}
`)
	write("b/b.go", `package b

import "time"

func notATest() { time.Sleep(1) }
`)
	write("c/testdata/c_test.go", `package c

import "time"

func TestFixture() { time.Sleep(1) }
`)
	allow := map[sleepSite]allowedSleep{
		{"a/a_test.go", "poll"}:         {1, "polling helper"},
		{"a/a_test.go", "TestTwice"}:    {1, "one of its two"},
		{"a/a_test.go", "fixture.wait"}: {1, "a method"},
		{"a/a_test.go", "gone"}:         {1, "no longer sleeps"},
		{"d/d_test.go", "TestAfter"}:    {1, "its bare wait only"},
	}
	got := checkSleeps(t, root, allow)
	want := []string{
		"a/a_test.go: TestTwice calls time.Sleep 2 times, 1 allowed (one of its two)",
		"a/a_test.go: gone is allowed 1 sleeps (no longer sleeps) and has 0: update allowedSleeps",
		"b/b_test.go:5: TestRenamed calls time.Sleep: wait for a signal or poll a condition through a helper, or list it in allowedSleeps with the reason it is not ordering",
		"d/d_test.go: TestAfter calls time.Sleep 2 times, 1 allowed (its bare wait only)",
		"d/d_test.go:5: TestDot calls time.Sleep: wait for a signal or poll a condition through a helper, or list it in allowedSleeps with the reason it is not ordering",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// checkSleeps parses every _test.go file under root (testdata and dot directories aside) and returns, sorted,
// a problem for each function that calls time.Sleep more often than allow says, and for each allowed function
// that calls it less often.
func checkSleeps(t *testing.T, root string, allow map[sleepSite]allowedSleep) []string {
	t.Helper()
	found := map[sleepSite][]token.Position{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		for fn, positions := range sleepsIn(fset, f) {
			site := sleepSite{filepath.ToSlash(rel), fn}
			found[site] = append(found[site], positions...)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var problems []string
	for site, positions := range found {
		a, ok := allow[site]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("%s:%d: %s calls time.Sleep: wait for a signal or poll a condition through a helper, or list it in allowedSleeps with the reason it is not ordering",
				site.file, positions[0].Line, site.fn))
		case len(positions) > a.n:
			problems = append(problems, fmt.Sprintf("%s: %s calls time.Sleep %d times, %d allowed (%s)", site.file, site.fn, len(positions), a.n, a.reason))
		}
	}
	for site, a := range allow {
		if n := len(found[site]); n < a.n {
			problems = append(problems, fmt.Sprintf("%s: %s is allowed %d sleeps (%s) and has %d: update allowedSleeps", site.file, site.fn, a.n, a.reason, n))
		}
	}
	sort.Strings(problems)
	return problems
}

// sleepsIn returns the positions of every reference to time.Sleep in f, and of every statement that only
// waits for a time.After (a sleep by another name), by the top-level function they are written in
// ("Type.Method" for methods, "var" outside any function). A dot-imported time's Sleep counts too.
func sleepsIn(fset *token.FileSet, f *ast.File) map[string][]token.Position {
	timeName := ""
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == "time" {
			timeName = "time"
			if imp.Name != nil {
				timeName = imp.Name.Name
			}
		}
	}
	if timeName == "" || timeName == "_" {
		return nil
	}
	// isTime reports whether e names the time package's function fn.
	isTime := func(e ast.Expr, fn string) bool {
		switch e := e.(type) {
		case *ast.SelectorExpr:
			x, ok := e.X.(*ast.Ident)
			return ok && x.Name == timeName && e.Sel.Name == fn
		case *ast.Ident:
			return timeName == "." && e.Name == fn
		}
		return false
	}
	sleeps := map[string][]token.Position{}
	for _, decl := range f.Decls {
		name := "var"
		if fd, ok := decl.(*ast.FuncDecl); ok {
			name = funcName(fd)
		}
		var inspect func(ast.Node) bool
		inspect = func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CommClause: // a select's case waits for whichever comes first, not for the time alone
				for _, stmt := range n.Body {
					ast.Inspect(stmt, inspect)
				}
				return false
			case *ast.SelectorExpr, *ast.Ident:
				if isTime(n.(ast.Expr), "Sleep") {
					sleeps[name] = append(sleeps[name], fset.Position(n.Pos()))
				}
			case *ast.ExprStmt:
				if recv, ok := n.X.(*ast.UnaryExpr); ok && recv.Op == token.ARROW {
					if call, ok := recv.X.(*ast.CallExpr); ok && isTime(call.Fun, "After") {
						sleeps[name] = append(sleeps[name], fset.Position(n.Pos()))
					}
				}
			}
			return true
		}
		ast.Inspect(decl, inspect)
	}
	return sleeps
}

// funcName is fd's name, with its receiver's type for a method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	typ := fd.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	switch x := typ.(type) {
	case *ast.IndexExpr: // a generic type's method
		typ = x.X
	case *ast.IndexListExpr:
		typ = x.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}
