package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocLinks: every relative link of the repository's documentation names a file that exists and, with a
// #fragment, a heading of that file (GitHub's anchors: lower case, punctuation dropped, spaces as dashes).
func TestDocLinks(t *testing.T) {
	root := "../.."
	var docs []string
	for _, pattern := range []string{"*.md", "docs/*.md", "sdk/*.md", "sdk/examples/*/README.md", "plugins/README.md", "hack/e2e-node/README.md"} {
		m, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, m...)
	}
	if len(docs) < 5 {
		t.Fatalf("found only %d documents", len(docs))
	}
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, doc := range docs {
		data, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(data), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, fragment, _ := strings.Cut(target, "#")
			path := doc
			if file != "" {
				path = filepath.Join(filepath.Dir(doc), file)
			}
			content, err := os.ReadFile(path)
			if err != nil {
				if info, serr := os.Stat(path); serr == nil && info.IsDir() {
					continue
				}
				t.Errorf("%s: link %s: %v", doc, target, err)
				continue
			}
			if fragment != "" && !hasAnchor(string(content), fragment) {
				t.Errorf("%s: link %s: %s has no heading with that anchor", doc, target, path)
			}
		}
	}
}

func hasAnchor(markdown, anchor string) bool {
	drop := regexp.MustCompile(`[^a-z0-9 _-]`)
	for _, line := range strings.Split(markdown, "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		if strings.ReplaceAll(drop.ReplaceAllString(h, ""), " ", "-") == anchor {
			return true
		}
	}
	return false
}
