package testutil

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// ScriptCase is one command of a golden script (RunScript): the command
// line, the input lines under it, and the output expected after "----".
type ScriptCase struct {
	Line   int      // of the command, for messages
	Lead   []string // comments and blank lines before the command
	Cmd    string
	Input  []string
	Output []string // expected (as read from the file)
}

// RunScript runs the golden script in file: a sequence of commands, each
// followed by its input lines, a "----" line and the output it must produce,
// a blank line or a "#" comment between commands. run executes one command
// and returns its output lines; a difference fails the test. With rewrite,
// the file is written back with the outputs run produced (review the diff).
func RunScript(t testing.TB, file string, rewrite bool, run func(c *ScriptCase) []string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	var out strings.Builder
	var lead []string
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			lead = append(lead, l)
			continue
		}
		c := ScriptCase{Line: i + 1, Lead: lead, Cmd: l}
		lead = nil
		for i++; i < len(lines) && lines[i] != "----"; i++ {
			c.Input = append(c.Input, lines[i])
		}
		if i == len(lines) {
			t.Fatalf("%s:%d: %q has no ---- line", file, c.Line, l)
		}
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
			c.Output = append(c.Output, lines[i])
		}
		i-- // the blank line (if any) leads the next command
		got := run(&c)
		if !rewrite && !slices.Equal(got, c.Output) {
			t.Errorf("%s:%d: %s\ngot:\n  %s\nwant:\n  %s", file, c.Line, c.Cmd, strings.Join(got, "\n  "), strings.Join(c.Output, "\n  "))
		}
		for _, s := range c.Lead {
			out.WriteString(s + "\n")
		}
		out.WriteString(c.Cmd + "\n")
		for _, s := range c.Input {
			out.WriteString(s + "\n")
		}
		out.WriteString("----\n")
		for _, s := range got {
			out.WriteString(s + "\n")
		}
	}
	for _, s := range lead {
		out.WriteString(s + "\n")
	}
	if rewrite {
		if err := os.WriteFile(file, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
