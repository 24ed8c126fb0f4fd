package v1alpha1_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// repoRoot is the repository's top directory, from this package's.
const repoRoot = "../../.."

// quotedName is a name the docs quote as code: one CamelCase word in backticks (`PluginFailed`,
// `TestSandbox`, `InvalidModule`).
var quotedName = regexp.MustCompile("`([A-Z][a-z]+(?:[A-Z][a-z0-9]*)+)`")

// notOurs are names the docs quote from other projects' code.
var notOurs = map[string]string{
	"MachineDeploymentComplete": "machine-controller's function docs/drift.md compares the rollout with",
	"WatchListClient":           "client-go's feature gate docs/operations.md says the controller turns off",
}

// TestDocsNameWhatTheCodeDefines: every condition reason, runtime reason, type or test a doc quotes is one the
// code defines: a Test, Fuzz or Benchmark function of some _test.go file, or else a declared name or a string
// constant of the Go source (a condition reason is both). A rename that leaves a doc behind fails here.
func TestDocsNameWhatTheCodeDefines(t *testing.T) {
	defined, tests := definedNames(t)
	docs := []string{"README.md", "sdk/README.md", "sdk/SPEC.md"}
	more, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range more {
		rel, _ := filepath.Rel(repoRoot, m)
		docs = append(docs, rel)
	}
	checked := 0
	for _, doc := range docs {
		text, err := os.ReadFile(filepath.Join(repoRoot, doc))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range quotedName.FindAllStringSubmatch(string(text), -1) {
			name := m[1]
			checked++
			isTest := strings.HasPrefix(name, "Test") || strings.HasPrefix(name, "Fuzz") || strings.HasPrefix(name, "Benchmark")
			switch {
			case notOurs[name] != "":
			case isTest && !tests[name]:
				t.Errorf("%s quotes the test %s, which no _test.go file defines", doc, name)
			case !isTest && !defined[name]:
				t.Errorf("%s quotes %s, which the code neither declares nor has as a string constant", doc, name)
			}
		}
	}
	if checked < 100 {
		t.Errorf("only %d quoted names found: is the pattern still the docs' style?", checked)
	}
}

// definedNames parses every Go file of the repository: the names it declares (functions, methods, types,
// constants, variables, fields) and the one-word string literals it holds, and apart the test functions.
func definedNames(t *testing.T) (defined, tests map[string]bool) {
	t.Helper()
	defined, tests = map[string]bool{}, map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "_fakeprovider") && path != repoRoot {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		isTestFile := strings.HasSuffix(path, "_test.go")
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				defined[n.Name.Name] = true
				if isTestFile && n.Recv == nil {
					tests[n.Name.Name] = true
				}
			case *ast.TypeSpec:
				defined[n.Name.Name] = true
			case *ast.ValueSpec:
				for _, id := range n.Names {
					defined[id.Name] = true
				}
			case *ast.Field:
				for _, id := range n.Names {
					defined[id.Name] = true
				}
			case *ast.BasicLit:
				if n.Kind == token.STRING {
					if s, err := strconv.Unquote(n.Value); err == nil {
						defined[s] = true
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return defined, tests
}
