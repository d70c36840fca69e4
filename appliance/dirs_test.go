package appliance

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/testutil"
)

// TestOverlappingDirsRefused: a console data directory inside a log dir, a
// log dir inside the console data directory, and log dirs inside one
// another are refused when the configuration loads, with an error that
// names the key to change; relative paths count from the working directory
// and symbolic links are followed. Directories side by side are accepted.
func TestOverlappingDirsRefused(t *testing.T) {
	base := t.TempDir()
	t.Chdir(base)
	if err := os.MkdirAll(filepath.Join(base, "real"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(base, "real"), filepath.Join(base, "link")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		overrides []string
		want      []string // in the error; none = accepted
	}{
		{"the issue's layout: log.dirs=./data with the default console.data.dir", []string{"log.dirs=./data"},
			[]string{"config: console.data.dir=./data/console lies inside log.dirs=./data (resolved: " + base + "/data/console and " + base + "/data): set console.data.dir to a directory outside every log dir"}},
		{"log.dirs=data, a relative path without ./", []string{"log.dirs=data"},
			[]string{"console.data.dir=./data/console lies inside log.dirs=data"}},
		{"log.dir", []string{"log.dir=" + base}, []string{"console.data.dir=./data/console lies inside log.dir=" + base + " ", "set console.data.dir"}},
		{"absolute console dir inside", []string{"log.dirs=" + base + "/k", "console.data.dir=" + base + "/k/c"},
			[]string{"console.data.dir=" + base + "/k/c lies inside log.dirs=" + base + "/k: set console.data.dir"}},
		{"the same directory", []string{"log.dirs=./d", "console.data.dir=d"}, []string{"console.data.dir=d is the same directory as log.dirs=./d"}},
		{"log dir inside the console dir", []string{"log.dirs=./c/kafka", "console.data.dir=./c"},
			[]string{"log.dirs=./c/kafka lies inside console.data.dir=./c (resolved: " + base + "/c/kafka and " + base + "/c): change log.dirs or console.data.dir so that neither holds the other"}},
		{"log dirs inside one another", []string{"log.dirs=/srv/a,/srv/a/b"}, []string{"config: log.dirs: /srv/a/b lies inside /srv/a: change log.dirs so that no log dir holds another"}},
		{"a log dir twice", []string{"log.dirs=/srv/a,/srv/a/"}, []string{"log.dirs: /srv/a/ is the same directory as /srv/a: list each directory once in log.dirs"}},
		{"through a symbolic link", []string{"log.dirs=./link", "console.data.dir=./real/console"},
			[]string{"console.data.dir=./real/console lies inside log.dirs=./link (resolved: " + base + "/real/console and " + base + "/real)"}},
		{"a prefix is not a parent", []string{"log.dirs=./data/kafka", "console.data.dir=./data/kafka-console"}, nil},
		{"the defaults", nil, nil},
		{"the packaged layout", []string{"log.dirs=/var/lib/sluice/kafka", "console.data.dir=/var/lib/sluice/console"}, nil},
		{"no console, no console dir", []string{"log.dirs=./data", "console.listen="}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load("", tc.overrides)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

// startStop loads the configuration, starts the appliance and closes it.
func startStop(t *testing.T, path string, overrides ...string) (string, error) {
	t.Helper()
	cfg, err := Load(path, overrides)
	if err != nil {
		return "", err
	}
	var logged testutil.LockedBuffer
	app, err := New(cfg, slog.New(slog.NewTextHandler(&logged, nil)))
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := app.Start(ctx); err != nil {
		return logged.String(), err
	}
	if err := app.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	return logged.String(), nil
}

// TestRestartWithDefaultLayout is the restart scenario of a first-time
// operator: `make run` (the defaults: ./data/kafka and ./data/console in the
// working directory) starts, stops and starts again, console included; the
// layout that used to break the second start (log.dirs=./data, the console
// inside it) is refused at the first start with the key to change; and a
// log dir that an earlier version left holding a console directory starts,
// with a warning, once console.data.dir points elsewhere.
func TestRestartWithDefaultLayout(t *testing.T) {
	base := t.TempDir()
	t.Chdir(base)
	listen := func() []string {
		return []string{"listeners=PLAINTEXT://" + testutil.FreeAddr(t), "console.listen=" + testutil.FreeAddr(t),
			"offsets.topic.num.partitions=1"}
	}
	for i := 1; i <= 2; i++ {
		if _, err := startStop(t, "", listen()...); err != nil {
			t.Fatalf("start %d with the default layout: %v", i, err)
		}
	}
	for _, p := range []string{"data/kafka/meta.properties", "data/console/console.db"} {
		if _, err := os.Stat(filepath.Join(base, p)); err != nil {
			t.Errorf("the default layout lacks %s: %v", p, err)
		}
	}

	// The layout that used to break every second start: log.dirs=./data,
	// console.data.dir left at ./data/console. Refused at the first start,
	// before anything is written.
	fresh := filepath.Join(base, "fresh")
	if err := os.Mkdir(fresh, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(fresh)
	_, err := startStop(t, "", append(listen(), "log.dirs=./data")...)
	if err == nil || !strings.Contains(err.Error(), "console.data.dir=./data/console lies inside log.dirs=./data (resolved: "+fresh+"/data/console and "+fresh+"/data): set console.data.dir") {
		t.Fatalf("log.dirs=./data with the default console.data.dir: %v", err)
	}
	if ents, _ := os.ReadDir(fresh); len(ents) != 0 {
		t.Fatalf("the refused start wrote %v", ents)
	}
	t.Chdir(base)

	old := filepath.Join(base, "old")
	// What an earlier version left behind: the console database inside the
	// log dir. With console.data.dir moved out, the broker starts and says
	// what it skipped.
	if err := os.MkdirAll(filepath.Join(old, "console"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(old, "console", "console.db"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2; i++ {
		logged, err := startStop(t, "", append(listen(), "log.dirs=./old", "console.data.dir=./console")...)
		if err != nil {
			t.Fatalf("start %d with a stray directory in the log dir: %v", i, err)
		}
		if !strings.Contains(logged, "not a partition") || !strings.Contains(logged, "dir=old/console") {
			t.Errorf("start %d: no warning about old/console:\n%s", i, logged)
		}
	}
}

// TestTrailingCommentWarning: a value with " #" in a properties file is the
// whole text (Java's format has no trailing comments), and the start logs a
// warning naming the key.
func TestTrailingCommentWarning(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "server.properties")
	props := "# a comment line\nbroker.rack=eu-west-1a                     # optional: replicas spread over racks\n" +
		"listeners=PLAINTEXT://" + testutil.FreeAddr(t) + "\nlog.dirs=" + filepath.Join(dir, "kafka") + "\nconsole.listen=\n"
	if err := os.WriteFile(path, []byte(props), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(cfg.BrokerRack, "eu-west-1a ") || !strings.HasSuffix(cfg.BrokerRack, "racks") {
		t.Fatalf("broker.rack = %q: the properties format keeps the trailing text", cfg.BrokerRack)
	}
	logged, err := startStop(t, path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logged, "level=WARN") || !strings.Contains(logged, `broker.rack=\"eu-west-1a`) || !strings.Contains(logged, "no trailing comments") {
		t.Fatalf("no warning about broker.rack:\n%s", logged)
	}
}
