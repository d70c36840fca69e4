package loglevels

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestLevels(t *testing.T) {
	var buf bytes.Buffer
	l := New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}), slog.LevelInfo)
	log := slog.New(l.Handler())
	st := log.With("component", "storage")
	br := log.With("component", "broker")
	st.Debug("storage debug 1")
	br.Info("broker info 1")
	if strings.Contains(buf.String(), "storage debug 1") || !strings.Contains(buf.String(), "broker info 1") {
		t.Fatalf("root INFO: %s", buf.String())
	}
	if err := l.Set("storage", "TRACE"); err != nil {
		t.Fatal(err)
	}
	if err := l.Set("broker", "WARN"); err != nil {
		t.Fatal(err)
	}
	st.Debug("storage debug 2")
	br.Info("broker info 2")
	log.Debug("root debug")
	if !strings.Contains(buf.String(), "storage debug 2") || strings.Contains(buf.String(), "broker info 2") || strings.Contains(buf.String(), "root debug") {
		t.Fatalf("per component: %s", buf.String())
	}
	got := l.Loggers()
	if len(got) != 3 || got[0] != (Logger{Root, "INFO", true}) || got[1] != (Logger{"broker", "WARN", true}) || got[2] != (Logger{"storage", "DEBUG", true}) {
		t.Fatalf("loggers %+v", got)
	}
	if err := l.Reset("broker"); err != nil {
		t.Fatal(err)
	}
	br.Info("broker info 3")
	if !strings.Contains(buf.String(), "broker info 3") {
		t.Fatal("reset did not return broker to root's level")
	}
	for _, bad := range [][2]string{{"nosuch", "INFO"}, {"broker", "LOUD"}} {
		if err := l.Set(bad[0], bad[1]); err == nil {
			t.Errorf("Set(%q, %q) accepted", bad[0], bad[1])
		}
	}
	if l.Reset(Root) == nil || l.Reset("nosuch") == nil {
		t.Error("reset of root or of an unknown logger accepted")
	}
	// A group keeps the component.
	l.Set("storage", "ERROR")
	st.WithGroup("g").Warn("grouped warn")
	if strings.Contains(buf.String(), "grouped warn") {
		t.Fatal("a group lost its component's level")
	}
}
