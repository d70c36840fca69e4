package packaging

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/testutil"
)

// pkgTestEnv set to "0" skips the tests that install the package on this
// machine.
const pkgTestEnv = "SLUICE_PKG_TEST"

// Paths the package owns or creates on the host.
const (
	hostConfig  = "/etc/sluice/server.properties"
	hostData    = "/var/lib/sluice"
	hostBinary  = "/usr/bin/sluice"
	hostUnit    = "/lib/systemd/system/sluice.service"
	hostWantsLn = "/etc/systemd/system/multi-user.target.wants/sluice.service"
)

// Files deb-systemd-helper keeps about the unit; purge must remove them all.
var helperState = []string{
	"/etc/systemd/system/sluice.service", // the mask of a removed package
	"/var/lib/systemd/deb-systemd-helper-enabled/sluice.service.dsh-also",
	"/var/lib/systemd/deb-systemd-helper-enabled/multi-user.target.wants/sluice.service",
	"/var/lib/systemd/deb-systemd-helper-masked/sluice.service",
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func debInstalled() bool {
	out, _ := exec.Command("dpkg-query", "-W", "-f=${Status}", "sluice").Output()
	return strings.Contains(string(out), "install ok installed") || strings.Contains(string(out), "config-files")
}

// requireHostInstall skips unless this test may install packages here: root,
// dpkg present, $SLUICE_PKG_TEST not "0", and no Sluice installation to clobber.
func requireHostInstall(t *testing.T) {
	t.Helper()
	testutil.Heavy(t, "installs packages on this host")
	if os.Getenv(pkgTestEnv) == "0" {
		t.Skipf("%s=0", pkgTestEnv)
	}
	if os.Geteuid() != 0 {
		t.Skip("installing the package needs root")
	}
	testutil.RequireBinary(t, "dpkg")
	testutil.RequireBinary(t, "adduser") // the package's one dependency; dpkg -i does not fetch it
	if debInstalled() || exists(hostData) || exists("/etc/sluice") || exists(hostBinary) {
		t.Skip("this machine has a Sluice installation; the test does not touch it")
	}
}

// TestDebInstallOnHost installs the .deb with dpkg -i on this machine (systemd
// is not running here, so the maintainer scripts must cope), checks the user,
// directories and permissions, runs the installed binary as the sluice user
// with the installed configuration, produces and consumes with the installed
// CLI, upgrades to a newer package (local configuration and data kept),
// removes (data and configuration kept) and purges (all gone but the user),
// cleaning up fully even when it fails.
func TestDebInstallOnHost(t *testing.T) {
	testutil.Heavy(t, "installs the .deb on this host")
	requireHostInstall(t)
	a := buildArtifacts(t)
	_, userErr := user.Lookup("sluice")
	userExisted := userErr == nil
	t.Cleanup(func() {
		if debInstalled() {
			if out, err := exec.Command("dpkg", "--purge", "sluice").CombinedOutput(); err != nil {
				t.Logf("cleanup: dpkg --purge: %v\n%s", err, out)
			}
		}
		exec.Command("dpkg-statoverride", "--remove", hostConfig).Run()
		for _, p := range append([]string{hostData, "/etc/sluice", hostWantsLn}, helperState...) {
			os.RemoveAll(p)
		}
		if !userExisted {
			exec.Command("userdel", "sluice").Run()
			exec.Command("groupdel", "sluice").Run()
		}
	})

	out := run(t, "dpkg", "-i", a.deb)
	t.Logf("dpkg -i:\n%s", out)

	// The sluice system user and group.
	u, err := user.Lookup("sluice")
	if err != nil {
		t.Fatalf("no sluice user after install: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if uid == 0 || uid >= 1000 || u.HomeDir != hostData {
		t.Errorf("sluice user: uid %d home %q, want a system uid and home %s", uid, u.HomeDir, hostData)
	}
	if g, err := user.LookupGroup("sluice"); err != nil || g.Gid != u.Gid {
		t.Errorf("sluice group: %v %v (user's gid %s)", g, err, u.Gid)
	}
	passwd := run(t, "getent", "passwd", "sluice")
	if !strings.HasSuffix(strings.TrimSpace(passwd), "/usr/sbin/nologin") {
		t.Errorf("sluice can log in: %s", passwd)
	}

	// Files, directories and their owners and modes.
	checkStat(t, hostBinary, 0o755, 0, 0)
	checkStat(t, hostConfig, 0o640, 0, gid)
	checkStat(t, "/etc/sluice", 0o755, 0, 0)
	checkStat(t, hostUnit, 0o644, 0, 0)
	for _, d := range []string{hostData, hostData + "/kafka", hostData + "/console"} {
		checkStat(t, d, 0o750, uid, gid)
	}
	if target, err := os.Readlink(hostWantsLn); err != nil || target != hostUnit {
		t.Errorf("the unit is not enabled for boot: %s -> %q (%v)", hostWantsLn, target, err)
	}
	if analyze, err := exec.LookPath("systemd-analyze"); err == nil {
		if out, err := exec.Command(analyze, "verify", "--man=no", hostUnit).CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
			t.Errorf("systemd-analyze verify %s: %v\n%s", hostUnit, err, out)
		}
	}
	if v := run(t, hostBinary, "version"); !strings.Contains(v, "sluice "+a.version) {
		t.Errorf("sluice version: %q", v)
	}

	// Run it as systemd would: user sluice, the installed configuration,
	// working directory /var/lib/sluice; loopback ports instead of :9092/:8080.
	broker := startInstalled(t, a.binary, uint32(uid), uint32(gid))
	cli := func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.Command(hostBinary, append(args, "--brokers", broker.addr)...)
		cmd.Stdin = strings.NewReader(stdin)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("sluice %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
		}
		return string(out)
	}
	cli("", "topics", "create", "installed", "--partitions", "1")
	cli("one\ntwo\nthree\n", "produce", "installed")
	if got := cli("", "consume", "installed", "--from", "earliest", "--max-messages", "3", "--quiet"); got != "one\ntwo\nthree\n" {
		t.Fatalf("consumed %q", got)
	}
	partDir := filepath.Join(hostData, "kafka", "installed-0")
	if st, err := os.Stat(partDir); err != nil || st.Sys().(*syscall.Stat_t).Uid != uint32(uid) {
		t.Fatalf("partition directory %s: %v (want it owned by sluice)", partDir, err)
	}
	broker.stop(t)

	// Upgrade to a newer version: a local edit of the configuration and the
	// data survive.
	edit := "\n# local edit kept across upgrades\n"
	f, err := os.OpenFile(hostConfig, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(edit)
	f.Close()
	newer := nextVersion(a.version)
	paths, err := runPackageScript(a.binary, filepath.Join(a.dir, "dist-upgrade"), newer, "deb")
	if err != nil || len(paths) != 1 {
		t.Fatalf("building %s: %v %q", newer, err, paths)
	}
	run(t, "dpkg", "-i", paths[0])
	if v := strings.TrimSpace(run(t, "dpkg-query", "-W", "-f=${Version}", "sluice")); v != newer+"-1" {
		t.Errorf("after upgrade: version %q, want %s-1", v, newer)
	}
	if cfg, _ := os.ReadFile(hostConfig); !strings.HasSuffix(string(cfg), edit) {
		t.Errorf("the upgrade replaced the locally edited %s", hostConfig)
	}
	checkStat(t, hostConfig, 0o640, 0, gid)
	broker = startInstalled(t, a.binary, uint32(uid), uint32(gid))
	if got := cli("", "consume", "installed", "--from", "earliest", "--max-messages", "3", "--quiet"); got != "one\ntwo\nthree\n" {
		t.Fatalf("after upgrade consumed %q", got)
	}
	broker.stop(t)

	// Remove: the program goes, configuration and data stay.
	run(t, "dpkg", "-r", "sluice")
	for _, p := range []string{hostBinary, hostUnit} {
		if exists(p) {
			t.Errorf("%s is still there after dpkg -r", p)
		}
	}
	for _, p := range []string{hostConfig, partDir} {
		if !exists(p) {
			t.Errorf("%s is gone after dpkg -r (remove must keep configuration and data)", p)
		}
	}

	// Purge: configuration, data and the service's traces go; the user stays.
	run(t, "dpkg", "--purge", "sluice")
	for _, p := range append([]string{hostData, "/etc/sluice", hostWantsLn}, helperState...) {
		if exists(p) {
			t.Errorf("%s is still there after dpkg --purge", p)
		}
	}
	if out, _ := exec.Command("dpkg-statoverride", "--list", hostConfig).Output(); len(out) > 0 {
		t.Errorf("dpkg-statoverride still lists %s", out)
	}
	if _, err := user.Lookup("sluice"); err != nil {
		t.Errorf("purge removed the sluice user (Debian keeps system users): %v", err)
	}
}

func checkStat(t *testing.T, path string, mode os.FileMode, uid, gid int) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return
	}
	sys := st.Sys().(*syscall.Stat_t)
	if st.Mode().Perm() != mode || int(sys.Uid) != uid || int(sys.Gid) != gid {
		t.Errorf("%s: mode %o owner %d:%d, want %o %d:%d", path, st.Mode().Perm(), sys.Uid, sys.Gid, mode, uid, gid)
	}
}

// nextVersion bumps the patch number: 0.1.0 -> 0.1.1 (a prerelease suffix is
// dropped).
func nextVersion(v string) string {
	core, _, _ := strings.Cut(v, "-")
	parts := strings.Split(core, ".")
	n, _ := strconv.Atoi(parts[len(parts)-1])
	parts[len(parts)-1] = strconv.Itoa(n + 1)
	return strings.Join(parts, ".")
}

type installedBroker struct {
	addr string
	cmd  *exec.Cmd
	done chan error
}

// startInstalled starts /usr/bin/sluice serve as the sluice user with the
// installed configuration, as the unit does, and waits until it serves: for
// READY=1 on $NOTIFY_SOCKET when the binary sends it, else for the listener.
func startInstalled(t *testing.T, builtBinary string, uid, gid uint32) *installedBroker {
	t.Helper()
	addr := testutil.FreeAddr(t)
	consoleAddr := testutil.FreeAddr(t)

	// An abstract socket: no file permissions for the sluice user to need.
	notifyName := fmt.Sprintf("@sluice-pkgtest-%d-%d", os.Getpid(), time.Now().UnixNano())
	notify, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: notifyName, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer notify.Close()

	cmd := exec.Command(hostBinary, "serve", "--config", hostConfig,
		"--override", "listeners=PLAINTEXT://"+addr,
		"--override", "console.listen="+consoleAddr)
	cmd.Dir = hostData
	cmd.Env = []string{"PATH=/usr/bin:/bin", "NOTIFY_SOCKET=" + notifyName}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	b := &installedBroker{addr: addr, cmd: cmd, done: make(chan error, 1)}
	go func() { b.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-b.done
		}
		if t.Failed() {
			t.Logf("sluice serve output:\n%s", logs.String())
		}
	})

	bin, err := os.ReadFile(builtBinary)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(bin, []byte("READY=1\nSTATUS=serving")) {
		notify.SetReadDeadline(time.Now().Add(60 * time.Second))
		buf := make([]byte, 512)
		for {
			n, err := notify.Read(buf)
			if err != nil {
				t.Fatalf("no READY=1 on NOTIFY_SOCKET within 60s: %v\n%s", err, logs.String())
			}
			if bytes.Contains(buf[:n], []byte("READY=1")) {
				break
			}
		}
	} else {
		t.Log("this binary does not send sd_notify READY=1 yet; waiting for the listener instead")
	}
	testutil.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
		select {
		case err := <-b.done:
			b.done <- err
			return fmt.Errorf("sluice serve exited: %v\n%s", err, logs.String())
		default:
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return err
		}
		return c.Close()
	})
	return b
}

// stop sends SIGTERM, as systemctl stop does, and expects a clean exit.
func (b *installedBroker) stop(t *testing.T) {
	t.Helper()
	b.cmd.Process.Signal(syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	select {
	case err := <-b.done:
		if err != nil {
			t.Fatalf("sluice serve did not exit cleanly on SIGTERM: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("sluice serve did not exit within 60s of SIGTERM")
	}
}

// TestInstallScriptPackageOnHost runs install.sh with the .deb on this
// machine: install with flags, again (no change), --uninstall (configuration
// and data kept), --uninstall --purge (gone, package record included).
func TestInstallScriptPackageOnHost(t *testing.T) {
	testutil.Heavy(t, "installs the package on this host with apt-get")
	requireHostInstall(t)
	testutil.RequireBinary(t, "apt-get")
	a := buildArtifacts(t)
	_, userErr := user.Lookup("sluice")
	userExisted := userErr == nil
	t.Cleanup(func() {
		if debInstalled() {
			exec.Command("dpkg", "--purge", "sluice").Run()
		}
		exec.Command("dpkg-statoverride", "--remove", hostConfig).Run()
		for _, p := range append([]string{hostData, "/etc/sluice", hostWantsLn}, helperState...) {
			os.RemoveAll(p)
		}
		if !userExisted {
			exec.Command("userdel", "sluice").Run()
			exec.Command("groupdel", "sluice").Run()
		}
	})

	flags := []string{"--package", a.deb, "--broker-id", "7", "--listen", "127.0.0.1:19092"}
	code, out, errOut := installSh(t, nil, nil, flags...)
	if code != 0 {
		t.Fatalf("install: exit %d\n%s%s", code, out, errOut)
	}
	if !debInstalled() || !exists(hostBinary) {
		t.Fatalf("install.sh did not install the package:\n%s", out)
	}
	cfg, _ := os.ReadFile(hostConfig)
	for _, want := range []string{"\nbroker.id=7\n", "\nlisteners=PLAINTEXT://127.0.0.1:19092\n"} {
		if !strings.Contains(string(cfg), want) {
			t.Errorf("%s lacks %q", hostConfig, want)
		}
	}
	if !strings.Contains(out, "systemd is not running here") || !strings.Contains(out, "sluice console user add") {
		t.Errorf("install output:\n%s", out)
	}
	if code, out, _ = installSh(t, nil, nil, flags...); code != 0 || !strings.Contains(out, "\n0 change(s)\n") {
		t.Fatalf("second run: exit %d\n%s", code, out)
	}
	if code, out, errOut = installSh(t, nil, nil, "--uninstall"); code != 0 || exists(hostBinary) || !exists(hostConfig) || !exists(hostData) {
		t.Fatalf("uninstall: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut = installSh(t, nil, nil, "--uninstall", "--purge"); code != 0 {
		t.Fatalf("purge: exit %d\n%s%s", code, out, errOut)
	}
	if debInstalled() || exists(hostConfig) || exists(hostData) {
		t.Fatalf("after --uninstall --purge: package recorded %v, config %v, data %v\n%s",
			debInstalled(), exists(hostConfig), exists(hostData), out)
	}
}
