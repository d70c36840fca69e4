package packaging

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-io/sluice/internal/testutil"
)

// unitDirectives are what the service relies on; each must appear as a line
// of systemd/sluice.service.
var unitDirectives = []string{
	"Type=notify",
	"User=sluice",
	"Group=sluice",
	"ExecStart=/usr/bin/sluice serve --config /etc/sluice/server.properties",
	"Restart=on-failure",
	"LimitNOFILE=131072",
	"MemoryHigh=80%",
	"MemoryMax=90%",
	"TasksMax=4096",
	"TimeoutStopSec=180",
	"NoNewPrivileges=yes",
	"CapabilityBoundingSet=",
	"ProtectSystem=strict",
	"ReadWritePaths=/var/lib/sluice",
	"ProtectHome=yes",
	"PrivateTmp=yes",
	"PrivateDevices=yes",
	"ProtectKernelTunables=yes",
	"ProtectKernelModules=yes",
	"ProtectControlGroups=yes",
	"RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX",
	"SystemCallFilter=@system-service",
	"SystemCallErrorNumber=EPERM",
	"UMask=0027",
	"StandardOutput=journal",
	"WantedBy=multi-user.target",
}

// TestUnitVerifies runs `systemd-analyze verify` on the unit (with ExecStart
// pointing at a built binary, since none is installed at /usr/bin here), checks
// the directives above, and that systemd rates its exposure as low.
func TestUnitVerifies(t *testing.T) {
	testutil.Heavy(t, "builds the binary and the .deb and .rpm")
	analyze := testutil.RequireBinary(t, "systemd-analyze")
	a := buildArtifacts(t)
	unit, err := os.ReadFile(filepath.Join(repoRoot, "systemd", "sluice.service"))
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string]bool{}
	for _, l := range strings.Split(string(unit), "\n") {
		lines[strings.TrimSpace(l)] = true
	}
	for _, d := range unitDirectives {
		if !lines[d] {
			t.Errorf("sluice.service lacks the line %q", d)
		}
	}

	path := filepath.Join(t.TempDir(), "sluice.service")
	local := strings.ReplaceAll(string(unit), "/usr/bin/sluice ", a.binary+" ")
	if err := os.WriteFile(path, []byte(local), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", "--man=no", path).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}

	// The drop-ins docs/installing-and-operating.md shows (resource limits, IPAddressAllow, ...)
	// are what `systemctl edit sluice` would write: each must verify on
	// top of the unit, without a warning.
	readme, err := os.ReadFile(filepath.Join(repoRoot, "docs", "installing-and-operating.md"))
	if err != nil {
		t.Fatal(err)
	}
	dropIns := regexp.MustCompile("(?s)```ini\n(.*?)```").FindAllSubmatch(readme, -1)
	if len(dropIns) < 3 {
		t.Fatalf("docs/installing-and-operating.md shows %d drop-ins, want the ReadWritePaths, resource-limit and IPAddressAllow ones", len(dropIns))
	}
	dropInDir := path + ".d"
	for _, d := range dropIns {
		if err := os.MkdirAll(dropInDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dropInDir, "override.conf"), d[1], 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(analyze, "verify", "--man=no", path).CombinedOutput()
		if err != nil || len(strings.TrimSpace(string(out))) > 0 {
			t.Errorf("systemd-analyze verify with the documented drop-in\n%s: %v\n%s", d[1], err, out)
		}
	}
	if err := os.RemoveAll(dropInDir); err != nil {
		t.Fatal(err)
	}

	out, err = exec.Command(analyze, "security", "--offline=yes", path).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze security: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no exposure level in:\n%s", out)
	}
	if level, _ := strconv.ParseFloat(string(m[1]), 64); level > 2.0 {
		t.Fatalf("exposure level %.1f, want at most 2.0 (OK):\n%s", level, out)
	}
}

// TestDebPackage inspects the .deb: control fields, files with their modes and
// owners, the conffile, the maintainer scripts, and lintian.
func TestDebPackage(t *testing.T) {
	testutil.Heavy(t, "builds the binary and the .deb and .rpm")
	testutil.RequireBinary(t, "dpkg-deb")
	a := buildArtifacts(t)

	fields := map[string]string{}
	for _, f := range []string{"Package", "Version", "Architecture", "Depends", "Section", "Maintainer", "Description"} {
		fields[f] = strings.TrimSpace(run(t, "dpkg-deb", "-f", a.deb, f))
	}
	arch := strings.TrimSpace(run(t, "go", "env", "GOARCH"))
	want := map[string]string{"Package": "sluice", "Version": strings.Replace(a.version, "-", "~", 1) + "-1",
		"Architecture": arch, "Depends": "adduser", "Section": "net"}
	for k, v := range want {
		if fields[k] != v {
			t.Errorf("control %s: %q, want %q", k, fields[k], v)
		}
	}
	if !strings.Contains(fields["Maintainer"], "@") || !strings.HasPrefix(fields["Description"], "Kafka-compatible") {
		t.Errorf("control Maintainer %q / Description %q", fields["Maintainer"], fields["Description"])
	}

	info := run(t, "dpkg-deb", "-I", a.deb)
	for _, s := range []string{"conffiles", "postinst", "prerm", "postrm"} {
		if !strings.Contains(info, " "+s) {
			t.Errorf("dpkg-deb -I lists no %s:\n%s", s, info)
		}
	}

	// dpkg-deb -c: "-rwxr-xr-x root/root 13852570 2026-11-30 00:14 ./usr/bin/sluice"
	files := map[string]string{}
	for _, l := range strings.Split(run(t, "dpkg-deb", "-c", a.deb), "\n") {
		f := strings.Fields(l)
		if len(f) >= 6 {
			files[strings.TrimPrefix(f[5], ".")] = f[0] + " " + f[1]
		}
	}
	for path, modeOwner := range map[string]string{
		"/usr/bin/sluice":                           "-rwxr-xr-x root/root",
		"/etc/sluice/":                              "drwxr-xr-x root/root",
		"/etc/sluice/server.properties":             "-rw-r----- root/root", // group sluice via dpkg-statoverride
		"/lib/systemd/system/sluice.service":        "-rw-r--r-- root/root",
		"/usr/share/man/man1/sluice.1.gz":           "-rw-r--r-- root/root",
		"/usr/share/doc/sluice/copyright":           "-rw-r--r-- root/root",
		"/usr/share/doc/sluice/changelog.Debian.gz": "-rw-r--r-- root/root",
		"/usr/share/doc/sluice/README.md":           "-rw-r--r-- root/root",
		"/usr/share/lintian/overrides/sluice":       "-rw-r--r-- root/root",
	} {
		if files[path] != modeOwner {
			t.Errorf("%s: %q, want %q", path, files[path], modeOwner)
		}
	}
	for path := range files {
		if strings.HasPrefix(path, "/var/lib/sluice") {
			t.Errorf("the package ships %s; data directories are made by postinst and survive removal", path)
		}
	}

	ctrl := t.TempDir()
	run(t, "dpkg-deb", "-e", a.deb, ctrl)
	conffiles, err := os.ReadFile(filepath.Join(ctrl, "conffiles"))
	if err != nil || strings.TrimSpace(string(conffiles)) != "/etc/sluice/server.properties" {
		t.Errorf("conffiles: %q, %v", conffiles, err)
	}
	for _, s := range []string{"postinst", "prerm", "postrm"} {
		p := filepath.Join(ctrl, s)
		st, err := os.Stat(p)
		if err != nil || st.Mode().Perm() != 0o755 {
			t.Errorf("%s: %v %v", s, st, err)
			continue
		}
		run(t, "sh", "-n", p)
	}
	data := t.TempDir()
	run(t, "dpkg-deb", "-x", a.deb, data)
	if c, err := os.ReadFile(filepath.Join(data, "usr/share/doc/sluice/copyright")); err != nil ||
		!strings.Contains(string(c), "License: Apache-2.0") {
		t.Errorf("copyright does not say Apache-2.0: %v\n%s", err, c)
	}
	postinst, _ := os.ReadFile(filepath.Join(ctrl, "postinst"))
	for _, s := range []string{"adduser --system", "dpkg-statoverride --update --add root sluice 0640",
		"deb-systemd-helper enable", "[ -d /run/systemd/system ]", "deb-systemd-invoke \"$action\"",
		"${SLUICE_NO_START:-}"} {
		if !strings.Contains(string(postinst), s) {
			t.Errorf("postinst lacks %q", s)
		}
	}

	if lintian, err := exec.LookPath("lintian"); err == nil {
		out, _ := exec.Command(lintian, "--tag-display-limit", "0", a.deb).CombinedOutput()
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, "E: ") || strings.HasPrefix(l, "W: ") {
				t.Errorf("lintian: %s", l)
			}
		}
	} else {
		testutil.RequireBinary(t, "lintian")
	}
}

// TestRpmPackage inspects the .rpm with Debian's rpm tool.
func TestRpmPackage(t *testing.T) {
	testutil.Heavy(t, "builds the binary and the .deb and .rpm")
	testutil.RequireBinary(t, "rpm")
	a := buildArtifacts(t)

	info := run(t, "rpm", "-qp", "--qf", "%{NAME}|%{VERSION}|%{RELEASE}|%{ARCH}|%{LICENSE}|%{SUMMARY}", a.rpm)
	f := strings.Split(info, "|")
	arch := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[strings.TrimSpace(run(t, "go", "env", "GOARCH"))]
	if f[0] != "sluice" || f[2] != "1" || f[3] != arch || !strings.HasPrefix(f[5], "Kafka-compatible") {
		t.Errorf("rpm -qp: %q", info)
	}
	if f[4] != "Apache-2.0" {
		t.Errorf("rpm License %q, want Apache-2.0", f[4])
	}
	if !strings.HasPrefix(a.version, f[1]) {
		t.Errorf("rpm version %q, VERSION %q", f[1], a.version)
	}
	if !strings.Contains(run(t, "rpm", "-qip", a.rpm), "Name        : sluice") {
		t.Error("rpm -qip does not describe sluice")
	}

	// rpm -qlvp: "-rw-r-----    1 root     sluice    6370 Nov 30 00:14 /etc/sluice/server.properties"
	files := map[string]string{}
	for _, l := range strings.Split(run(t, "rpm", "-qlvp", a.rpm), "\n") {
		f := strings.Fields(l)
		if len(f) >= 9 {
			files[f[len(f)-1]] = f[0] + " " + f[2] + "/" + f[3]
		}
	}
	for path, modeOwner := range map[string]string{
		"/usr/bin/sluice":                        "-rwxr-xr-x root/root",
		"/etc/sluice":                            "drwxr-xr-x root/root",
		"/etc/sluice/server.properties":          "-rw-r----- root/sluice",
		"/usr/lib/systemd/system/sluice.service": "-rw-r--r-- root/root",
		"/usr/share/man/man1/sluice.1.gz":        "-rw-r--r-- root/root",
	} {
		if files[path] != modeOwner {
			t.Errorf("%s: %q, want %q", path, files[path], modeOwner)
		}
	}

	flags := run(t, "rpm", "-qp", "--qf", "[%{FILENAMES} %{FILEFLAGS:fflags}\n]", a.rpm)
	if !regexp.MustCompile(`(?m)^/etc/sluice/server.properties cn$`).MatchString(flags) {
		t.Errorf("server.properties is not %%config(noreplace):\n%s", flags)
	}
	if cfg := strings.TrimSpace(run(t, "rpm", "-qp", "--configfiles", a.rpm)); cfg != "/etc/sluice/server.properties" {
		t.Errorf("config files: %q", cfg)
	}
	if req := run(t, "rpm", "-qp", "--requires", a.rpm); !strings.Contains(req, "shadow-utils") {
		t.Errorf("requires: %q", req)
	}

	scripts := run(t, "rpm", "-qp", "--scripts", a.rpm)
	for _, s := range []string{"preinstall scriptlet", "postinstall scriptlet", "preuninstall scriptlet", "postuninstall scriptlet",
		"useradd --system", "systemctl enable sluice.service", "systemctl try-restart sluice.service", "[ -d /run/systemd/system ]",
		"${SLUICE_NO_START:-}"} {
		if !strings.Contains(scripts, s) {
			t.Errorf("rpm scripts lack %q", s)
		}
	}
	for _, s := range []string{"pre", "post", "preun", "postun"} {
		run(t, "sh", "-n", filepath.Join(repoRoot, "packaging", "rpm", s))
	}
}
