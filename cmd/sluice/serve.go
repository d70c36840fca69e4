package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/sluice-io/sluice/appliance"
	"github.com/sluice-io/sluice/config"
	"github.com/sluice-io/sluice/internal/buildinfo"
	"github.com/sluice-io/sluice/internal/loglevels"
	"github.com/sluice-io/sluice/internal/sdnotify"
)

func init() {
	register(&command{
		name:    "serve",
		summary: "run the broker (and the console) until SIGTERM or SIGINT",
		run:     runServe,
	})
}

// overrides collects repeated --override key=value flags, as
// kafka-server-start.sh takes them.
type overrides []string

func (o *overrides) String() string     { return strings.Join(*o, ",") }
func (o *overrides) Set(v string) error { *o = append(*o, v); return nil }

func runServe(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var (
		configPath string
		over       overrides
		logLevel   string
	)
	fs.StringVar(&configPath, "config", "", "properties file with Kafka's broker keys (every key: docs/configuration.md, or below)")
	fs.Var(&over, "override", "key=value overriding the file; repeatable")
	fs.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			serveUsage(fs, os.Stdout)
			return 0
		}
		fmt.Fprintf(os.Stderr, "sluice serve: %v\n\n", err)
		serveUsage(fs, os.Stderr)
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "sluice serve: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(logLevel)); err != nil {
		fmt.Fprintf(os.Stderr, "sluice serve: --log-level %q: %v\n", logLevel, err)
		return exitUsage
	}
	// The level can change while the broker runs (BROKER_LOGGER configs):
	// loglevels filters, the text handler lets everything through.
	logger := slog.New(loglevels.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}), level).Handler())

	cfg, err := appliance.Load(configPath, over)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sluice serve: %v\n", err)
		return exitUsage
	}
	logger.Info("sluice starting", "version", buildinfo.Version, "commit", buildinfo.CommitOrVCS(), "config", configPath)
	app, err := appliance.New(cfg, logger)
	if err != nil {
		return errorExit("serve", err)
	}
	if err := app.Start(ctx); err != nil {
		return errorExit("serve", err)
	}
	// Everything listens now (Start returns once the Kafka listeners and the
	// components, the console among them, accept connections): tell systemd
	// (Type=notify). Outside systemd these calls do nothing.
	if err := sdnotify.Ready(); err != nil {
		logger.Warn("sd_notify READY failed", "err", err)
	}
	watchdogDone := make(chan struct{})
	go func() {
		defer close(watchdogDone)
		sdnotify.RunWatchdog(ctx, nil)
	}()
	<-ctx.Done()
	logger.Info("shutting down")
	if err := sdnotify.Stopping(); err != nil {
		logger.Warn("sd_notify STOPPING failed", "err", err)
	}
	err = app.Close()
	<-watchdogDone
	if err != nil {
		return errorExit("serve", err)
	}
	return 0
}

func serveUsage(fs *flag.FlagSet, w io.Writer) {
	fmt.Fprint(w, "Usage: sluice serve [--config FILE] [--override key=value]...\n\n")
	fmt.Fprint(w, "Runs the broker until SIGTERM or SIGINT, then shuts down cleanly.\n\nFlags:\n")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprint(w, "\nConfiguration keys (Kafka's names) and their defaults:\n")
	for _, k := range config.Keys() {
		def := k.Default
		if def == "" {
			def = `""`
		}
		fmt.Fprintf(w, "  %-34s %s\n      %s\n", k.Name, def, k.Doc)
	}
}
