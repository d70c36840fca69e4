package packaging

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/sluice-io/sluice/appliance"
	"github.com/sluice-io/sluice/internal/testutil"
)

// installSh runs ../install.sh with args and returns its exit code and output.
func installSh(t *testing.T, env []string, cred *syscall.Credential, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(repoRoot, "install.sh"), args...)
	cmd.Env = append(os.Environ(), env...)
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("install.sh: %v", err)
		}
		code = ee.ExitCode()
	}
	return code, stdout.String(), stderr.String()
}

// snapshot describes every file under root: type, mode, content hash, mtime.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		desc := fmt.Sprintf("%v %d", st.Mode(), st.ModTime().UnixNano())
		switch {
		case st.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			desc += " -> " + target
		case st.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += fmt.Sprintf(" %x", sha256.Sum256(b))
		}
		rel, _ := filepath.Rel(root, p)
		out[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func diffSnapshots(a, b map[string]string) []string {
	var d []string
	for k, v := range a {
		if b[k] != v {
			d = append(d, fmt.Sprintf("%s: %q -> %q", k, v, b[k]))
		}
	}
	for k, v := range b {
		if _, ok := a[k]; !ok {
			d = append(d, fmt.Sprintf("%s: new %q", k, v))
		}
	}
	sort.Strings(d)
	return d
}

// TestInstallScriptIntoRoot installs the binary layout into a temporary root:
// a dry run changes nothing, the install writes the layout and the flags into
// the configuration, a second run changes nothing, a changed flag changes
// only its key, and --uninstall keeps configuration and data unless --purge.
func TestInstallScriptIntoRoot(t *testing.T) {
	testutil.Heavy(t, "builds the binary and the .deb and .rpm")
	a := buildArtifacts(t)
	root := t.TempDir()
	flags := []string{"--root", root, "--binary", a.binary, "--broker-id", "3",
		"--zookeeper", "zk1:2181,zk2:2181/sluice", "--listen", "127.0.0.1:19092", "--advertise", "kafka1.example:9092"}

	code, out, errOut := installSh(t, nil, nil, append(flags, "--dry-run")...)
	if code != 0 || !strings.Contains(out, "would: install "+root+"/usr/bin/sluice") || !strings.Contains(out, "would: set broker.id=3") {
		t.Fatalf("dry run: exit %d\n%s%s", code, out, errOut)
	}
	if s := snapshot(t, root); len(s) != 1 { // only root itself
		t.Fatalf("the dry run wrote files: %v", s)
	}

	code, out, errOut = installSh(t, nil, nil, flags...)
	if code != 0 {
		t.Fatalf("install: exit %d\n%s%s", code, out, errOut)
	}
	for p, mode := range map[string]os.FileMode{
		"usr/bin/sluice":                    0o755,
		"etc/systemd/system/sluice.service": 0o644,
		"etc/sluice/server.properties":      0o640,
		"var/lib/sluice":                    0o750 | fs.ModeDir,
		"var/lib/sluice/kafka":              0o750 | fs.ModeDir,
		"var/lib/sluice/console":            0o750 | fs.ModeDir,
	} {
		st, err := os.Stat(filepath.Join(root, p))
		if err != nil || st.Mode() != mode {
			t.Errorf("%s: %v %v, want mode %v", p, st.Mode(), err, mode)
		}
	}
	if target, err := os.Readlink(filepath.Join(root, "etc/systemd/system/multi-user.target.wants/sluice.service")); err != nil || target != "/etc/systemd/system/sluice.service" {
		t.Errorf("not enabled at boot: %q %v", target, err)
	}
	for _, want := range []string{"Console:  http://", "sluice console user add", "Kafka:    PLAINTEXT://kafka1.example:9092", "change(s)"} {
		if !strings.Contains(out, want) {
			t.Errorf("install output lacks %q:\n%s", want, out)
		}
	}
	configPath := filepath.Join(root, "etc/sluice/server.properties")
	cfg, err := appliance.Load(configPath, nil)
	if err != nil {
		t.Fatalf("the written configuration does not load: %v", err)
	}
	if cfg.BrokerID != 3 || cfg.ZookeeperConnect != "zk1:2181,zk2:2181/sluice" ||
		len(cfg.Listeners) != 1 || cfg.Listeners[0].Addr() != "127.0.0.1:19092" ||
		len(cfg.AdvertisedListeners) != 1 || cfg.AdvertisedListeners[0].Addr() != "kafka1.example:9092" {
		t.Fatalf("written configuration: broker.id=%d zookeeper.connect=%q listeners=%v advertised=%v",
			cfg.BrokerID, cfg.ZookeeperConnect, cfg.Listeners, cfg.AdvertisedListeners)
	}
	if strings.Join(cfg.LogDirs, ",") != "/var/lib/sluice/kafka" {
		t.Fatalf("log.dirs %v", cfg.LogDirs)
	}

	// Idempotent: the same command again, and its dry run, change nothing.
	before := snapshot(t, root)
	for _, extra := range [][]string{nil, {"--dry-run"}} {
		code, out, errOut = installSh(t, nil, nil, append(flags, extra...)...)
		if code != 0 || !strings.Contains(out, "\n0 change(s)\n") {
			t.Fatalf("second run %v: exit %d\n%s%s", extra, code, out, errOut)
		}
		if d := diffSnapshots(before, snapshot(t, root)); len(d) > 0 {
			t.Fatalf("second run %v changed files:\n%s", extra, strings.Join(d, "\n"))
		}
	}

	// A local edit survives; a changed flag changes only its own line.
	cfgBefore, _ := os.ReadFile(configPath)
	edited := strings.Replace(string(cfgBefore), "#num.partitions=1", "num.partitions=6", 1)
	if err := os.WriteFile(configPath, []byte(edited), 0o640); err != nil {
		t.Fatal(err)
	}
	flags[5] = "4" // --broker-id
	code, out, errOut = installSh(t, nil, nil, flags...)
	if code != 0 || !strings.Contains(out, "\n1 change(s)\n") {
		t.Fatalf("changed flag: exit %d\n%s%s", code, out, errOut)
	}
	cfgAfter, _ := os.ReadFile(configPath)
	if want := strings.Replace(edited, "broker.id=3", "broker.id=4", 1); string(cfgAfter) != want {
		t.Fatalf("configuration after --broker-id 4:\n%s", cfgAfter)
	}

	// Uninstall keeps configuration and data; twice is fine; --purge deletes.
	code, out, errOut = installSh(t, nil, nil, "--root", root, "--uninstall")
	if code != 0 || !strings.Contains(out, "kept: ") {
		t.Fatalf("uninstall: exit %d\n%s%s", code, out, errOut)
	}
	for _, p := range []string{"usr/bin/sluice", "etc/systemd/system/sluice.service", "etc/systemd/system/multi-user.target.wants/sluice.service"} {
		if exists(filepath.Join(root, p)) {
			t.Errorf("%s remains after --uninstall", p)
		}
	}
	for _, p := range []string{"etc/sluice/server.properties", "var/lib/sluice/kafka"} {
		if !exists(filepath.Join(root, p)) {
			t.Errorf("--uninstall deleted %s", p)
		}
	}
	if code, out, _ = installSh(t, nil, nil, "--root", root, "--uninstall"); code != 0 || !strings.Contains(out, "\n0 change(s)\n") {
		t.Fatalf("second uninstall: exit %d\n%s", code, out)
	}
	if code, out, errOut = installSh(t, nil, nil, "--root", root, "--uninstall", "--purge"); code != 0 {
		t.Fatalf("purge: exit %d\n%s%s", code, out, errOut)
	}
	for _, p := range []string{"etc/sluice", "var/lib/sluice"} {
		if exists(filepath.Join(root, p)) {
			t.Errorf("%s remains after --uninstall --purge", p)
		}
	}
}

// TestInstallScriptRefuses checks the errors: not root, a foreign
// architecture, a package for the other family, and bad flags (exit 2); and
// the plan of a package install with --with-zookeeper, as a dry run.
func TestInstallScriptRefuses(t *testing.T) {
	testutil.Heavy(t, "builds the binary and the .deb and .rpm")
	a := buildArtifacts(t)

	// Not root, and neither --dry-run nor --root: a clear refusal.
	var nobody *syscall.Credential
	if os.Geteuid() == 0 {
		nobody = &syscall.Credential{Uid: 65534, Gid: 65534}
	}
	code, _, errOut := installSh(t, nil, nobody, "--binary", a.binary)
	if code != 1 || !strings.Contains(errOut, "must be run as root") {
		t.Errorf("as non-root: exit %d: %s", code, errOut)
	}

	// A machine of another architecture (uname says so).
	fake := t.TempDir()
	script := "#!/bin/sh\ncase \"$1\" in -m) echo mips64 ;; *) echo Linux ;; esac\n"
	if err := os.WriteFile(filepath.Join(fake, "uname"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = installSh(t, []string{"PATH=" + fake + ":" + os.Getenv("PATH")}, nil, "--root", t.TempDir(), "--binary", a.binary)
	if code != 1 || !strings.Contains(errOut, "unsupported architecture mips64") {
		t.Errorf("on mips64: exit %d: %s", code, errOut)
	}

	// A package of the other family than this host's.
	osRelease, _ := os.ReadFile("/etc/os-release")
	if strings.Contains(string(osRelease), "debian") {
		code, _, errOut = installSh(t, nil, nil, "--package", a.rpm, "--dry-run")
		if code != 1 || !strings.Contains(errOut, "is an .rpm but this host is not") {
			t.Errorf(".rpm on Debian: exit %d: %s", code, errOut)
		}
		// The right one, as a dry run: the plan, and nothing installed.
		// (Compared with the state before: a host may already have Sluice.)
		installedBefore := debInstalled()
		code, out, errOut := installSh(t, nil, nil, "--package", a.deb, "--dry-run", "--broker-id", "1", "--with-zookeeper")
		for _, want := range []string{
			"would run: env DEBIAN_FRONTEND=noninteractive SLUICE_NO_START=1 apt-get install -y -q " + a.deb,
			"would: set zookeeper.connect=localhost:2181", // written once the package put the file there
		} {
			if code != 0 || !strings.Contains(out, want) {
				t.Errorf(".deb dry run: exit %d, want %q in:\n%s%s", code, want, out, errOut)
			}
		}
		if !zookeeperdInstalled() && !strings.Contains(out, "would: install Debian's ZooKeeper (zookeeperd)") {
			t.Errorf("--with-zookeeper dry run does not plan zookeeperd:\n%s", out)
		}
		if !installedBefore && debInstalled() {
			t.Error("a dry run installed the package")
		}
	}

	for _, args := range [][]string{
		{"--broker-id", "one"},
		{"--listen", "9092"},
		{"--zookeeper", "zk 1:2181"},
		{"--purge"},
		{"--no-such-option"},
		{"--broker-id"},
		{"--package", "x.deb", "--binary", "y"},
	} {
		if code, _, errOut := installSh(t, nil, nil, append(args, "--dry-run")...); code != 2 || errOut == "" {
			t.Errorf("install.sh %v: exit %d, want 2 with a message: %s", args, code, errOut)
		}
	}
}

func zookeeperdInstalled() bool {
	out, _ := exec.Command("dpkg-query", "-W", "-f=${Status}", "zookeeperd").Output()
	return strings.Contains(string(out), "install ok installed")
}

// TestInstallScriptWithoutDist runs install.sh from a checkout after `make
// build` (bin/sluice, no dist/, or an empty one) as a dry run on this host:
// it falls back to bin/sluice instead of stopping silently under `set -euo
// pipefail`, and its summary shows what the flags set (--advertise,
// --console-listen, --listen), not the file it did not write.
func TestInstallScriptWithoutDist(t *testing.T) {
	testutil.Heavy(t, "builds the binary and the .deb and .rpm")
	a := buildArtifacts(t)
	for _, withDist := range []bool{false, true} {
		tree := t.TempDir()
		for src, dst := range map[string]string{
			filepath.Join(repoRoot, "install.sh"):                     "install.sh",
			filepath.Join(repoRoot, "packaging", "server.properties"): "packaging/server.properties",
			filepath.Join(repoRoot, "systemd", "sluice.service"):      "systemd/sluice.service",
			a.binary: "bin/sluice",
		} {
			b, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Dir(filepath.Join(tree, dst)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(tree, dst), b, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if withDist {
			if err := os.Mkdir(filepath.Join(tree, "dist"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command(filepath.Join(tree, "install.sh"), "--dry-run", "--advertise", "kafka1.example:9092",
			"--console-listen", "127.0.0.1:18080")
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		out := stdout.String()
		if err != nil || stderr.Len() > 0 {
			t.Fatalf("dist/ present: %v: %v\nstdout:\n%s\nstderr:\n%s", withDist, err, out, stderr.String())
		}
		for _, want := range []string{
			"source: " + filepath.Join(tree, "bin", "sluice") + "\n",
			"Kafka:    PLAINTEXT://kafka1.example:9092\n",
			"Console:  http://127.0.0.1:18080/\n",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("dist/ present: %v: the dry run lacks %q:\n%s", withDist, want, out)
			}
		}
	}
	code, out, errOut := installSh(t, nil, nil, "--root", t.TempDir(), "--binary", a.binary, "--dry-run", "--listen", "127.0.0.1:19093")
	if code != 0 || !strings.Contains(out, "Kafka:    PLAINTEXT://127.0.0.1:19093\n") {
		t.Fatalf("--listen in the summary of a dry run: exit %d\n%s%s", code, out, errOut)
	}
}
