package main

import (
	"context"
	"fmt"
	"runtime"

	"github.com/sluice-io/sluice/internal/buildinfo"
)

func init() {
	register(&command{
		name:    "version",
		summary: "print the version and commit of this build",
		run: func(ctx context.Context, args []string) int {
			fmt.Printf("sluice %s (commit %s, %s, %s/%s)\nLicensed under the %s licence; see LICENSE and NOTICE.\n",
				buildinfo.Version, buildinfo.CommitOrVCS(), runtime.Version(), runtime.GOOS, runtime.GOARCH,
				buildinfo.License)
			return 0
		},
	})
}
