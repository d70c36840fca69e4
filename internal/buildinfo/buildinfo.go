// Package buildinfo holds the version and commit stamped into the binary by the
// linker (-ldflags "-X ...") at build time.
package buildinfo

import "runtime/debug"

// Set by the Makefile with -ldflags "-X github.com/sluice-io/sluice/internal/buildinfo.Version=...".
var (
	Version = "dev"
	Commit  = ""
)

// CommitOrVCS returns Commit, or the VCS revision Go recorded when Commit is empty.
func CommitOrVCS() string {
	if Commit != "" {
		return Commit
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return "unknown"
}
