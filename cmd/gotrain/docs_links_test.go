package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// mdLink matches a Markdown link's target: ](target) or ](target#anchor).
var mdLink = regexp.MustCompile(`\]\(([^)#\s]+)(#[^)\s]*)?\)`)

// TestDocsLinksStayInRepo: every relative link in the README and docs/
// names a file of this repository, so a clone reads the architecture and
// the deep dives it is pointed to (the README once linked a design file
// outside the repository).
func TestDocsLinksStayInRepo(t *testing.T) {
	root := filepath.Join("..", "..")
	files, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	files = append(files, filepath.Join(root, "README.md"))
	if _, err := os.Stat(filepath.Join(root, "docs", "architecture.md")); err != nil {
		t.Fatalf("docs/architecture.md: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			p := filepath.Clean(filepath.Join(filepath.Dir(f), target))
			rel, err := filepath.Rel(root, p)
			if err != nil || strings.HasPrefix(rel, "..") {
				t.Errorf("%s links %s, outside the repository", f, target)
				continue
			}
			if _, err := os.Stat(p); err != nil {
				t.Errorf("%s links %s: %v", f, target, err)
			}
		}
	}
}
