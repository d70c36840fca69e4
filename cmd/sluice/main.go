// Command sluice is the single binary of the Sluice appliance: the broker and
// console (`sluice serve`) and the operator tools around them.
//
// main only parses the subcommand name and hands over. Each subcommand lives in
// its own file of this package and registers itself with register() from an
// init function, so subcommands can be added without touching this file.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
)

// command is one subcommand of sluice.
type command struct {
	name    string
	summary string // one line for `sluice help`
	// run executes the subcommand with the arguments after its name. It returns
	// the process exit code; errors it prints itself.
	run func(ctx context.Context, args []string) int
}

var commands = map[string]*command{}

func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("sluice: subcommand registered twice: " + c.name)
	}
	commands[c.name] = c
}

// exitUsage is the exit code for a command line that could not be parsed.
const exitUsage = 2

func main() {
	os.Exit(realMain(os.Args[1:]))
}

func realMain(args []string) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		if len(args) > 1 {
			if c, ok := commands[args[1]]; ok {
				return c.run(context.Background(), []string{"--help"})
			}
		}
		usage(os.Stdout)
		if len(args) == 0 {
			return exitUsage
		}
		return 0
	}
	if versionFlag(args[0]) {
		args[0] = "version"
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(os.Stderr, "sluice: unknown command %q\n\n", args[0])
		usage(os.Stderr)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return c.run(ctx, args[1:])
}

func usage(w *os.File) {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("Usage: sluice <command> [flags]\n\nCommands:\n")
	for _, n := range names {
		fmt.Fprintf(&b, "  %-10s %s\n", n, commands[n].summary)
	}
	b.WriteString("\nRun 'sluice <command> --help' for the flags of one command;\n'sluice --version' (or -v) is 'sluice version'.\n")
	fmt.Fprint(w, b.String())
}

// errorExit prints err prefixed with the command name and returns exit code 1.
func errorExit(cmd string, err error) int {
	if errors.Is(err, context.Canceled) {
		return 130
	}
	fmt.Fprintf(os.Stderr, "sluice %s: %v\n", cmd, err)
	return 1
}

// versionFlag reports whether a first argument asks for the version the way
// other tools are asked (kafka-topics.sh --version, go -version).
func versionFlag(arg string) bool {
	switch arg {
	case "--version", "-version", "-v", "-V":
		return true
	}
	return false
}
