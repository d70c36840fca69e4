package main

import (
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/sluice-io/sluice/config"
)

// sluice config docs|properties: the configuration reference and a sample
// server.properties, both written from the key table of package config.
// `make docs` regenerates docs/configuration.md and
// packaging/server.properties with them.

func init() {
	registerVerbs("config", "the configuration reference and a sample server.properties: config docs|properties", []*cliAction{
		{name: "docs", args: "[-o FILE]", summary: "write the configuration reference (Markdown, docs/configuration.md)", run: configDocs},
		{name: "properties", args: "[-o FILE] [--set key=value]...", summary: "write a server.properties naming every key, defaults commented out", run: configProperties},
	})
}

func configDocs(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags(env, "config docs [-o FILE]",
		"Writes the configuration reference, every key with its type, default, valid values,\n"+
			"Kafka's update mode and documentation, from the key table (docs/configuration.md).")
	out := fs.String("o", "", "write to `FILE` instead of standard output")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	return writeOutput(env, *out, config.WriteReference)
}

func configProperties(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags(env, "config properties [-o FILE] [--set key=value]...",
		"Writes a server.properties naming every key with its documentation and its default\n"+
			"commented out; the keys given with --set are written active with their value.")
	out := fs.String("o", "", "write to `FILE` instead of standard output")
	set := map[string]string{}
	fs.Func("set", "`key=value` written active instead of the default (repeatable)", func(s string) error {
		k, v, ok := strings.Cut(s, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return usagef("--set %q: want key=value", s)
		}
		set[strings.TrimSpace(k)] = v
		return nil
	})
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	return writeOutput(env, *out, func(w io.Writer) error { return config.WriteProperties(w, set) })
}

func parseNoArgs(fs *flag.FlagSet, args []string) error {
	rest, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("unexpected argument %q", rest[0])
	}
	return nil
}

// writeOutput writes to standard output, or replaces the file path whole
// (a reader never sees half a file).
func writeOutput(env *cliEnv, path string, write func(io.Writer) error) error {
	if path == "" {
		return write(env.stdout)
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".sluice-config-*")
	if err != nil {
		return err
	}
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}
