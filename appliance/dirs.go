package appliance

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
)

// checkDirs refuses data directories that lie inside one another: a log dir
// inside another log dir, the console data directory inside a log dir, or a
// log dir inside the console data directory. Every folder in a log dir is
// taken for a partition, so a console database or a second log dir there
// is either misread or (since the storage skips what is not a partition)
// silently mixed with partition data; and deleting or moving one directory
// would take the other with it. The error names the key to change.
//
// Paths are compared after making them absolute (relative paths are taken
// from the working directory, as the process uses them) and resolving the
// symbolic links of the part that exists already.
func (c *Config) checkDirs() []error {
	type dir struct {
		key, value, real string
	}
	logKey := "log.dirs"
	if _, ok := c.Given["log.dirs"]; !ok {
		if _, ok := c.Given["log.dir"]; ok {
			logKey = "log.dir"
		}
	}
	var dirs []dir
	for _, d := range c.LogDirs {
		dirs = append(dirs, dir{key: logKey, value: d})
	}
	if c.ConsoleListen != "" && c.ConsoleDataDir != "" {
		dirs = append(dirs, dir{key: "console.data.dir", value: c.ConsoleDataDir})
	}
	var errs []error
	for i := range dirs {
		real, err := realPath(dirs[i].value)
		if err != nil {
			errs = append(errs, fmt.Errorf("config: %s: %s: %w", dirs[i].key, dirs[i].value, err))
			return errs
		}
		dirs[i].real = real
	}
	for i, a := range dirs {
		for _, b := range dirs[:i] {
			inner, outer := a, b
			if !within(inner.real, outer.real) {
				inner, outer = b, a
				if !within(inner.real, outer.real) {
					continue
				}
			}
			var fix string
			switch {
			case inner.real == outer.real && inner.key == outer.key:
				fix = fmt.Sprintf("list each directory once in %s", inner.key)
			case inner.key == outer.key:
				fix = fmt.Sprintf("change %s so that no log dir holds another", inner.key)
			case inner.key == "console.data.dir":
				fix = "set console.data.dir to a directory outside every log dir (the defaults keep them apart: log.dirs=./data/kafka, console.data.dir=./data/console)"
			default:
				fix = fmt.Sprintf("change %s or console.data.dir so that neither holds the other", inner.key)
			}
			where := "lies inside"
			if inner.real == outer.real {
				where = "is the same directory as"
			}
			resolved := ""
			if filepath.Clean(inner.value) != inner.real || filepath.Clean(outer.value) != outer.real {
				resolved = fmt.Sprintf(" (resolved: %s and %s)", inner.real, outer.real)
			}
			if inner.key == outer.key {
				errs = append(errs, fmt.Errorf("config: %s: %s %s %s%s: %s", inner.key, inner.value, where, outer.value, resolved, fix))
			} else {
				errs = append(errs, fmt.Errorf("config: %s=%s %s %s=%s%s: %s", inner.key, inner.value, where, outer.key, outer.value, resolved, fix))
			}
		}
	}
	return errs
}

// within reports whether path is dir or lies below it (both absolute and
// clean).
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	if err != nil {
		return false
	}
	return rel == "." || rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// realPath is p made absolute and clean, with the symbolic links of its
// longest existing prefix resolved; the rest (directories start-up creates)
// is appended as written.
func realPath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	existing, rest := abs, ""
	for {
		real, err := filepath.EvalSymlinks(existing)
		if err == nil {
			return filepath.Join(real, rest), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(existing)
		if parent == existing {
			return abs, nil
		}
		rest = filepath.Join(filepath.Base(existing), rest)
		existing = parent
	}
}
