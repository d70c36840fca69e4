// Package buildinfo holds the version and commit stamped into the binary by the
// linker (-ldflags "-X ...") at build time.
package buildinfo

import "runtime/debug"

// Set by the Makefile with -ldflags "-X github.com/sluice-io/sluice/internal/buildinfo.Version=...".
var (
	Version = "dev"
	Commit  = ""
)

// License is the SPDX identifier of the licence Sluice is distributed under
// (LICENSE and NOTICE at the root of the source; /usr/share/doc/sluice/copyright
// in the packages).
const License = "Apache-2.0"

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
