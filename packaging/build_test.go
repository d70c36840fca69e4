package packaging

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sluice-io/sluice/internal/testutil"
)

// repoRoot is the repository root (this package's parent directory).
var repoRoot = func() string {
	wd, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	return filepath.Dir(wd)
}()

// artifacts are built once per test binary and shared by the tests.
type artifacts struct {
	dir     string // temporary directory holding everything below
	binary  string // static sluice binary, as `make build` makes it
	deb     string
	rpm     string
	version string // from VERSION
}

var (
	buildOnce sync.Once
	built     artifacts
	buildErr  error
	scratch   string // removed by TestMain
)

func TestMain(m *testing.M) {
	code := m.Run()
	if scratch != "" {
		os.RemoveAll(scratch)
	}
	os.Exit(code)
}

// buildArtifacts builds the binary like `make build` and both packages like
// `make package`, once. The tests that use it are of the heavy tier.
func buildArtifacts(t *testing.T) artifacts {
	t.Helper()
	testutil.Heavy(t, "builds the binary and the .deb and .rpm")
	buildOnce.Do(func() {
		buildErr = func() error {
			dir, err := os.MkdirTemp("", "sluice-packaging-")
			if err != nil {
				return err
			}
			scratch = dir
			v, err := os.ReadFile(filepath.Join(repoRoot, "VERSION"))
			if err != nil {
				return err
			}
			built = artifacts{dir: dir, binary: filepath.Join(dir, "bin", "sluice"), version: strings.TrimSpace(string(v))}
			ldflags := "-s -w -X github.com/sluice-io/sluice/internal/buildinfo.Version=" + built.version +
				" -X github.com/sluice-io/sluice/internal/buildinfo.Commit=test"
			build := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", built.binary, "./cmd/sluice")
			build.Dir = repoRoot
			build.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := build.CombinedOutput(); err != nil {
				return fmt.Errorf("go build: %v\n%s", err, out)
			}
			paths, err := runPackageScript(built.binary, filepath.Join(dir, "dist"), built.version, "deb rpm")
			if err != nil {
				return err
			}
			for _, p := range paths {
				switch filepath.Ext(p) {
				case ".deb":
					built.deb = p
				case ".rpm":
					built.rpm = p
				}
			}
			if built.deb == "" || built.rpm == "" {
				return fmt.Errorf("package.sh built %q, want a .deb and an .rpm", paths)
			}
			return nil
		}()
	})
	if buildErr != nil {
		t.Fatalf("building the packages: %v", buildErr)
	}
	return built
}

// runPackageScript runs scripts/package.sh and returns the paths it printed.
func runPackageScript(binary, dist, version, formats string) ([]string, error) {
	cmd := exec.Command("./scripts/package.sh", version)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "SLUICE_BIN="+binary, "SLUICE_DIST="+dist, "SLUICE_FORMATS="+formats)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("package.sh: %v\n%s", err, stderr.String())
	}
	return strings.Fields(string(out)), nil
}

// run runs a command and returns its standard output; it fails the test
// when the command fails.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr)
	}
	return string(out)
}
