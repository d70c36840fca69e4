// Package doccheck holds the tests that keep the project's documents true
// to the code: DESIGN.md's package map and dependency arrows against the
// imports (scripts/check-design.sh), and the links between the Markdown
// pages (README.md, DESIGN.md, BENCHMARKS.md, docs/) against the files and
// headings they point at.
package doccheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// root is the repository's top directory, seen from this package.
const root = "../.."

// TestDesignMatchesImports runs scripts/check-design.sh: every package of
// the module is in DESIGN.md's map, and its arrows are exactly the imports
// among the module's packages that go list reports, each with its reason.
func TestDesignMatchesImports(t *testing.T) {
	goCmd, err := exec.LookPath("go") // go test puts its own go first on PATH
	if err != nil {
		t.Fatalf("the go command is needed to list the imports: %v", err)
	}
	cmd := exec.Command("bash", filepath.Join("scripts", "check-design.sh"))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GO="+goCmd)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/check-design.sh: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// TestDocLinks: every relative link of the project's Markdown pages points
// at a file of the repository and, with a #fragment into a Markdown page,
// at one of its headings (GitHub's anchors), so that moving a section
// cannot leave a link behind.
func TestDocLinks(t *testing.T) {
	pages := []string{"README.md", "DESIGN.md", "BENCHMARKS.md"}
	for _, pattern := range []string{"docs/*.md", "docs/*/*.md"} {
		more, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range more {
			rel, _ := filepath.Rel(root, m)
			pages = append(pages, rel)
		}
	}
	anchors := map[string]map[string]bool{}
	anchorsOf := func(page string) map[string]bool {
		if a, ok := anchors[page]; ok {
			return a
		}
		b, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		a := headingAnchors(string(b))
		anchors[page] = a
		return a
	}
	links := 0
	for _, page := range pages {
		b, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range markdownLinks(string(b)) {
			if strings.Contains(l.target, "://") || strings.HasPrefix(l.target, "mailto:") {
				continue
			}
			links++
			path, frag, _ := strings.Cut(l.target, "#")
			target := page
			if path != "" {
				target = filepath.Join(filepath.Dir(page), filepath.FromSlash(path))
				if _, err := os.Stat(filepath.Join(root, target)); err != nil {
					t.Errorf("%s:%d: link to %s: no such file", page, l.line, l.target)
					continue
				}
			}
			if frag != "" && strings.HasSuffix(target, ".md") && !anchorsOf(target)[frag] {
				t.Errorf("%s:%d: link to %s: %s has no heading with the anchor #%s", page, l.line, l.target, target, frag)
			}
		}
	}
	if links < 50 {
		t.Errorf("found only %d relative links in %d pages; is the link pattern broken?", links, len(pages))
	}
}

type link struct {
	target string
	line   int
}

var linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// markdownLinks returns the targets of the inline links of a Markdown page
// outside fenced code blocks and inline code.
func markdownLinks(doc string) []link {
	var out []link
	fenced := false
	for i, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range linkRE.FindAllStringSubmatch(stripCode(line), -1) {
			out = append(out, link{target: m[1], line: i + 1})
		}
	}
	return out
}

// stripCode blanks the inline code spans of a line.
func stripCode(line string) string {
	parts := strings.Split(line, "`")
	for i := 1; i < len(parts); i += 2 {
		if i < len(parts)-1 { // an unclosed backtick is text
			parts[i] = ""
		}
	}
	return strings.Join(parts, "`")
}

// headingAnchors returns the anchors GitHub gives the headings of a
// Markdown page: lower case, punctuation other than '-' and '_' removed,
// spaces turned into '-', a repeated anchor suffixed -1, -2, ...
func headingAnchors(doc string) map[string]bool {
	anchors := map[string]bool{}
	fenced := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimLeft(line, "#")
		if len(line)-len(text) > 6 || !strings.HasPrefix(text, " ") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(text)) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		for n, i := a, 1; ; i++ {
			if !anchors[n] {
				anchors[n] = true
				break
			}
			n = a + "-" + strconv.Itoa(i)
		}
	}
	return anchors
}
