package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestPprofEndpoints: the profiling mux serves the standard endpoints and
// a CPU profile bracketed by start and stop, refusing a second start and a
// stop without a start.
func TestPprofEndpoints(t *testing.T) {
	srv := httptest.NewServer(pprofMux())
	defer srv.Close()
	do := func(method, path string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	if code, b := do("GET", "/debug/pprof/"); code != 200 || !strings.Contains(string(b), "goroutine") {
		t.Fatalf("index: %d %s", code, b)
	}
	if code, _ := do("GET", "/debug/pprof/allocs"); code != 200 {
		t.Fatalf("allocs: %d", code)
	}
	if code, _ := do("GET", "/debug/pprof/cpu/stop"); code != http.StatusConflict {
		t.Fatalf("stop without start: %d", code)
	}
	if code, _ := do("GET", "/debug/pprof/cpu/start"); code != http.StatusMethodNotAllowed {
		t.Fatalf("GET start: %d", code)
	}
	if code, b := do("POST", "/debug/pprof/cpu/start"); code != 200 {
		t.Fatalf("start: %d %s", code, b)
	}
	if code, _ := do("POST", "/debug/pprof/cpu/start"); code != http.StatusConflict {
		t.Fatalf("second start: %d", code)
	}
	x := 0
	for i := range 2_000_000 { // something to sample
		x += i * i % 7
	}
	_ = x
	code, b := do("GET", "/debug/pprof/cpu/stop")
	if code != 200 {
		t.Fatalf("stop: %d %s", code, b)
	}
	// A pprof profile is gzipped protobuf.
	if _, err := gzip.NewReader(bytes.NewReader(b)); err != nil {
		t.Fatalf("CPU profile is not a gzipped profile: %v", err)
	}
	if code, _ := do("POST", "/debug/pprof/cpu/start"); code != 200 {
		t.Fatalf("start after stop: %d", code)
	}
	if code, _ := do("GET", "/debug/pprof/cpu/stop"); code != 200 {
		t.Fatalf("stop again: %d", code)
	}
}

func TestPprofConfigErrors(t *testing.T) {
	if _, err := listenPprof("6060"); err == nil {
		t.Error("an address without a host:port form was accepted")
	}
	ln, err := listenPprof("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	t.Setenv("SLUICE_PPROF_MUTEX_FRACTION", "x")
	t.Setenv("SLUICE_PPROF_BLOCK_RATE", "-5")
	err = setProfileRates()
	if err == nil || !strings.Contains(err.Error(), "SLUICE_PPROF_MUTEX_FRACTION") || !strings.Contains(err.Error(), "SLUICE_PPROF_BLOCK_RATE") {
		t.Fatalf("bad rates: %v", err)
	}
}
