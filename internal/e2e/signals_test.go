package e2e

import "syscall"

const (
	sigterm = syscall.SIGTERM
	sigint  = syscall.SIGINT
)
