// Package loglevels is a slog.Handler whose level can change while the
// process runs, for the whole log ("root") and for each component (the
// "component" attribute the appliance gives each part's logger: broker,
// storage, protocol, ...). It serves Kafka's BROKER_LOGGER configs:
// DescribeConfigs lists the loggers and their levels, IncrementalAlterConfigs
// sets one (kafka-configs.sh --entity-type broker-loggers).
package loglevels

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Root is the name of the logger of everything without a level of its own.
const Root = "root"

// attrKey is the attribute that names a component.
const attrKey = "component"

// Levels holds the levels; Handler returns the handler that honours them.
// The zero value is not usable: use New.
type Levels struct {
	// levels is read on every log call without a lock; a change replaces
	// it whole under mu.
	levels atomic.Pointer[levels]
	mu     sync.Mutex
	known  map[string]bool // components seen
	inner  slog.Handler
}

type levels struct {
	root slog.Level
	set  map[string]slog.Level // components with a level of their own
}

// New wraps inner, which should let every level through (its own level is
// the floor), with root as the initial level of every component.
func New(inner slog.Handler, root slog.Level) *Levels {
	l := &Levels{known: map[string]bool{}, inner: inner}
	l.levels.Store(&levels{root: root, set: map[string]slog.Level{}})
	return l
}

// FromHandler returns the Levels behind a handler made by Handler.
func FromHandler(h slog.Handler) (*Levels, bool) {
	if lh, ok := h.(*handler); ok {
		return lh.l, true
	}
	return nil, false
}

// change replaces the levels with fn's changes to a copy; mu is held.
func (l *Levels) change(fn func(*levels)) {
	cur := l.levels.Load()
	next := &levels{root: cur.root, set: maps.Clone(cur.set)}
	fn(next)
	l.levels.Store(next)
}

// Handler is the handler to build the process's logger on.
func (l *Levels) Handler() slog.Handler { return &handler{l: l, inner: l.inner} }

// Logger is one logger and its level, as DescribeConfigs lists it.
type Logger struct {
	Name  string
	Level string // Kafka's (log4j) name: TRACE, DEBUG, INFO, WARN, ERROR
	Own   bool   // set for it, rather than the root's
}

// Loggers lists root and every component seen, sorted after root.
func (l *Levels) Loggers() []Logger {
	l.mu.Lock()
	defer l.mu.Unlock()
	cur := l.levels.Load()
	out := []Logger{{Name: Root, Level: Name(cur.root), Own: true}}
	for _, c := range slices.Sorted(maps.Keys(l.known)) {
		lv, own := cur.set[c]
		if !own {
			lv = cur.root
		}
		out = append(out, Logger{Name: c, Level: Name(lv), Own: own})
	}
	return out
}

// Set sets the level of a logger (root or a component seen) from Kafka's
// level names (TRACE and DEBUG are both debug here; FATAL is error).
func (l *Levels) Set(name, level string) error {
	lv, err := Parse(level)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case name == Root:
		l.change(func(s *levels) { s.root = lv })
	case l.known[name]:
		l.change(func(s *levels) { s.set[name] = lv })
	default:
		return fmt.Errorf("unknown logger %q", name)
	}
	return nil
}

// Reset returns a component to the root's level (Kafka's DELETE).
func (l *Levels) Reset(name string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if name == Root {
		return fmt.Errorf("the root logger's level cannot be removed")
	}
	if !l.known[name] {
		return fmt.Errorf("unknown logger %q", name)
	}
	l.change(func(s *levels) { delete(s.set, name) })
	return nil
}

// Known reports whether name is root or a component seen.
func (l *Levels) Known(name string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return name == Root || l.known[name]
}

// Parse reads Kafka's (log4j) level names.
func Parse(s string) (slog.Level, error) {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "TRACE", "DEBUG", "ALL":
		return slog.LevelDebug, nil
	case "INFO":
		return slog.LevelInfo, nil
	case "WARN":
		return slog.LevelWarn, nil
	case "ERROR", "FATAL", "OFF":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("%q is not a log level: want TRACE, DEBUG, INFO, WARN, ERROR or FATAL", s)
}

// Name is Kafka's name of a level.
func Name(l slog.Level) string {
	switch {
	case l < slog.LevelInfo:
		return "DEBUG"
	case l < slog.LevelWarn:
		return "INFO"
	case l < slog.LevelError:
		return "WARN"
	}
	return "ERROR"
}

func (l *Levels) enabled(component string, lv slog.Level) bool {
	cur := l.levels.Load()
	floor, ok := cur.set[component]
	if !ok {
		floor = cur.root
	}
	return lv >= floor
}

func (l *Levels) see(component string) {
	l.mu.Lock()
	l.known[component] = true
	l.mu.Unlock()
}

type handler struct {
	l         *Levels
	inner     slog.Handler
	component string
}

func (h *handler) Enabled(ctx context.Context, lv slog.Level) bool {
	return h.l.enabled(h.component, lv) && h.inner.Enabled(ctx, lv)
}

func (h *handler) Handle(ctx context.Context, r slog.Record) error { return h.inner.Handle(ctx, r) }

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := h.component
	for _, a := range attrs {
		if a.Key == attrKey {
			c = a.Value.String()
			h.l.see(c)
		}
	}
	return &handler{l: h.l, inner: h.inner.WithAttrs(attrs), component: c}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{l: h.l, inner: h.inner.WithGroup(name), component: h.component}
}
