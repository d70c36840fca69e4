package packaging

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sluice-io/sluice/appliance"
	"github.com/sluice-io/sluice/config"
)

// settingRE matches a setting line of server.properties: "key=value", or
// "#key=value" for a default left commented out (no space after '#'; prose
// and indented examples have one).
var settingRE = regexp.MustCompile(`^(#?)([a-z][a-z0-9_.-]*)=(.*)$`)

type setting struct {
	value  string
	active bool
	line   int
}

func readSettings(t *testing.T, path string) map[string]setting {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]setting{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		m := settingRE.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		if prev, dup := out[m[2]]; dup {
			t.Errorf("%s:%d: %s already appears on line %d", path, n, m[2], prev.line)
		}
		out[m[2]] = setting{value: m[3], active: m[1] == "", line: n}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestConfigFileListsEveryKey keeps /etc/sluice/server.properties honest: it
// names every key the binary knows, with the binary's own default, names no
// key the binary would reject, and loads.
func TestConfigFileListsEveryKey(t *testing.T) {
	path := filepath.Join(repoRoot, "packaging", "server.properties")
	got := readSettings(t, path)
	// What the package sets on purpose instead of the built-in default.
	packaged := map[string]string{
		"log.dirs":         "/var/lib/sluice/kafka",
		"console.data.dir": "/var/lib/sluice/console",
	}
	known := map[string]bool{}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range config.Keys() {
		known[k.Name] = true
		if k.IsPrefix() {
			// A family of keys (listener.name.<listener>.<key>) is
			// documented by its pattern, commented out.
			if !strings.Contains(string(raw), "\n#"+k.Name+"=\n") {
				t.Errorf("the key family %s is missing from server.properties", k.Name)
			}
			continue
		}
		s, ok := got[k.Name]
		switch {
		case !ok:
			t.Errorf("%s is missing from server.properties (default %q: %s)", k.Name, k.Default, k.Doc)
		case packaged[k.Name] != "":
			if !s.active || s.value != packaged[k.Name] {
				t.Errorf("line %d: want the active setting %s=%s", s.line, k.Name, packaged[k.Name])
			}
		case s.active:
			t.Errorf("line %d: %s is set; the package leaves it at its default (comment it out)", s.line, k.Name)
		case s.value != k.Default:
			t.Errorf("line %d: #%s=%s, but the binary's default is %q", s.line, k.Name, s.value, k.Default)
		}
	}
	for name, s := range got {
		if !known[name] {
			t.Errorf("line %d: %s is not a key the binary knows", s.line, name)
		}
	}

	cfg, err := appliance.Load(path, nil)
	if err != nil {
		t.Fatalf("the packaged configuration does not load: %v", err)
	}
	if strings.Join(cfg.LogDirs, ",") != "/var/lib/sluice/kafka" || cfg.ConsoleDataDir != "/var/lib/sluice/console" {
		t.Fatalf("loaded log.dirs=%v console.data.dir=%q", cfg.LogDirs, cfg.ConsoleDataDir)
	}
	if w := cfg.Warnings(); len(w) > 0 {
		t.Errorf("the packaged configuration draws warnings at start: %v", w)
	}

	// The file is generated from the key table; its comments are the keys'
	// documentation.
	var want bytes.Buffer
	if err := config.WriteProperties(&want, packaged); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b, want.Bytes()) {
		t.Errorf("packaging/server.properties is stale: regenerate it with `make docs` (go run ./cmd/sluice config properties --set log.dirs=%s --set console.data.dir=%s -o packaging/server.properties)",
			packaged["log.dirs"], packaged["console.data.dir"])
	}
}
