package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// With --profile (BENCH_PROFILE=1) the Sluice broker is started with
// SLUICE_PPROF_LISTEN on a free loopback port, and each phase of each
// workload is bracketed: a CPU profile from the phase's start to its end
// (POST /debug/pprof/cpu/start, GET /debug/pprof/cpu/stop) and the
// allocation profile before and after it (/debug/pprof/allocs?gc=1, the
// difference being the phase's allocations). The end-to-end phase also
// records an execution trace of a few seconds from its middle. The files go
// to <workdir>/profiles, and the report gets the top functions of each as
// text. Profiling costs the broker a few percent and a forced GC between
// phases: figures of a profiled run are a little lower than an unprofiled
// one's.

type profiler struct {
	base   string // http://127.0.0.1:PORT/debug/pprof
	dir    string
	tag    string
	client *http.Client
}

// profileFiles are the files of one phase.
type profileFiles struct {
	CPU         string `json:"cpu,omitempty"`
	AllocsStart string `json:"allocs_start,omitempty"`
	AllocsEnd   string `json:"allocs_end,omitempty"`
	Trace       string `json:"trace,omitempty"`
	Err         string `json:"error,omitempty"`
}

func newProfiler(addr, dir, tag string) *profiler {
	return &profiler{base: "http://" + addr + "/debug/pprof", dir: dir, tag: tag, client: &http.Client{Timeout: 2 * time.Minute}}
}

// waitReady polls the profiling endpoint until it answers.
func (p *profiler) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.base+"/cmdline", nil)
		resp, err := p.client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %s", resp.Status)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("profiling endpoint %s: %w", p.base, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (p *profiler) path(phase, kind string) string {
	return filepath.Join(p.dir, fmt.Sprintf("%s-%s.%s", p.tag, phase, kind))
}

// fetch saves the answer to method url in file.
func (p *profiler) fetch(ctx context.Context, method, url, file string) error {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s %s: %s: %s", method, url, resp.Status, strings.TrimSpace(string(b)))
	}
	if file == "" {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// begin starts profiling a phase.
func (p *profiler) begin(ctx context.Context, phase string) (*profileFiles, error) {
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return nil, err
	}
	pf := &profileFiles{AllocsStart: p.path(phase, "allocs0.pb.gz")}
	if err := p.fetch(ctx, http.MethodGet, p.base+"/allocs?gc=1", pf.AllocsStart); err != nil {
		return nil, err
	}
	if err := p.fetch(ctx, http.MethodPost, p.base+"/cpu/start", ""); err != nil {
		return nil, err
	}
	return pf, nil
}

// end stops profiling a phase and saves its profiles.
func (p *profiler) end(ctx context.Context, phase string, pf *profileFiles) error {
	pf.CPU = p.path(phase, "cpu.pb.gz")
	if err := p.fetch(ctx, http.MethodGet, p.base+"/cpu/stop", pf.CPU); err != nil {
		return err
	}
	pf.AllocsEnd = p.path(phase, "allocs1.pb.gz")
	return p.fetch(ctx, http.MethodGet, p.base+"/allocs?gc=1", pf.AllocsEnd)
}

// trace records an execution trace of secs seconds after delay, in the
// background; wait returns when it is saved (or failed).
func (p *profiler) trace(ctx context.Context, phase string, delay time.Duration, secs int, pf *profileFiles) (wait func() error) {
	done := make(chan error, 1)
	file := p.path(phase, "trace.out")
	go func() {
		select {
		case <-ctx.Done():
			done <- ctx.Err()
			return
		case <-time.After(delay):
		}
		done <- p.fetch(ctx, http.MethodGet, fmt.Sprintf("%s/trace?seconds=%d", p.base, secs), file)
	}()
	return func() error {
		err := <-done
		if err == nil {
			pf.Trace = file
		}
		return err
	}
}

// pprofSummary is what the report shows of one phase's profiles.
type pprofSummary struct {
	CPUTop        string // go tool pprof -top of the CPU profile
	AllocTop      string // of the phase's allocated space
	AllocBytes    float64
	AllocObjects  float64
	CPUSampledSec float64
}

var (
	totalRe     = regexp.MustCompile(`of ([0-9.]+)([a-zA-Z]*) total`)
	accountedRe = regexp.MustCompile(`accounting for ([0-9.]+)([a-zA-Z]*),`)
)

// parseTotal reads "... of 123.45MB total" from pprof's header, in base
// units (bytes, seconds, objects).
func parseTotal(out string) float64 { return parseUnit(totalRe.FindStringSubmatch(out)) }

// parseAccounted reads "Showing nodes accounting for 12.5MB, ..." likewise.
func parseAccounted(out string) float64 { return parseUnit(accountedRe.FindStringSubmatch(out)) }

func parseUnit(m []string) float64 {
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0
	}
	switch m[2] {
	case "kB":
		v *= 1 << 10
	case "MB":
		v *= 1 << 20
	case "GB":
		v *= 1 << 30
	case "ms":
		v /= 1000
	case "us":
		v /= 1e6
	case "k":
		v *= 1e3
	case "M":
		v *= 1e6
	}
	return v
}

// summarize runs go tool pprof on a phase's profiles.
func summarize(ctx context.Context, binary string, pf *profileFiles, nodes int) (*pprofSummary, error) {
	run := func(args ...string) (string, error) {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		cmd := exec.CommandContext(cctx, "go", append([]string{"tool", "pprof"}, args...)...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("go tool pprof %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
		}
		return out.String(), nil
	}
	s := &pprofSummary{}
	if pf.CPU != "" {
		out, err := run("-top", "-nodecount="+strconv.Itoa(nodes), "-ignore=runtime/pprof|net/http", binary, pf.CPU)
		if err != nil {
			return nil, err
		}
		s.CPUTop = trimPprofHeader(out)
		s.CPUSampledSec = parseTotal(out)
	}
	if pf.AllocsStart != "" && pf.AllocsEnd != "" {
		// The profiling endpoints' own allocations (the profiles being
		// encoded and served) are left out.
		ignore := "-ignore=runtime/pprof|net/http"
		out, err := run("-sample_index=alloc_space", ignore, "-top", "-nodecount="+strconv.Itoa(nodes), "-base", pf.AllocsStart, binary, pf.AllocsEnd)
		if err != nil {
			return nil, err
		}
		s.AllocTop = trimPprofHeader(out)
		// Totals: every node shown, so "accounting for" is the filtered
		// total ("of ... total" would count the ignored samples too).
		out, err = run("-sample_index=alloc_space", ignore, "-top", "-nodecount=100000", "-base", pf.AllocsStart, binary, pf.AllocsEnd)
		if err != nil {
			return nil, err
		}
		s.AllocBytes = parseAccounted(out)
		out, err = run("-sample_index=alloc_objects", ignore, "-top", "-nodecount=100000", "-base", pf.AllocsStart, binary, pf.AllocsEnd)
		if err != nil {
			return nil, err
		}
		s.AllocObjects = parseAccounted(out)
	}
	return s, nil
}

// trimPprofHeader drops the file, build id and time lines of pprof -top.
func trimPprofHeader(out string) string {
	var b strings.Builder
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "File:") || strings.HasPrefix(line, "Build ID:") || strings.HasPrefix(line, "Time:") ||
			strings.HasPrefix(line, "Type:") || strings.HasPrefix(line, "Dropped ") {
			continue
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.String()
}

// profileSection is one workload phase's profile summary in the report.
type profileSection struct {
	Workload, Phase string
	Records         int64
	Summary         *pprofSummary
	Err             string
}

// summarizeProfiles summarizes the first run's profiles of every workload.
func summarizeProfiles(ctx context.Context, c *config, ms []measurement) []profileSection {
	var out []profileSection
	for _, m := range ms {
		if m.Run != 1 || len(m.Profiles) == 0 {
			continue
		}
		for _, phase := range []string{"produce", "consume", "e2e"} {
			pf := m.Profiles[phase]
			if pf == nil {
				continue
			}
			sec := profileSection{Workload: m.Workload, Phase: phase}
			if m.System != "Sluice" {
				sec.Workload = m.System + ": " + m.Workload // the TLS systems
			}
			switch phase {
			case "produce":
				if m.Produce != nil {
					sec.Records = m.Produce.Records
				}
			case "consume":
				if m.Consume != nil {
					sec.Records = m.Consume.Records
				}
			default:
				if m.E2E != nil {
					sec.Records = m.E2E.Records
				}
			}
			if pf.Err != "" {
				sec.Err = pf.Err
			} else if s, err := summarize(ctx, c.Sluice, pf, 12); err != nil {
				sec.Err = err.Error()
			} else {
				sec.Summary = s
			}
			out = append(out, sec)
		}
	}
	return out
}

// profileMarkdown writes the profiles section of the report.
func (r *report) profileMarkdown(b *strings.Builder) {
	if len(r.profiles) == 0 {
		return
	}
	if r.cfg.Replication > 1 {
		fmt.Fprintf(b, "\n## Profiles of Sluice broker 1 of %d (BENCH_PROFILE=1, first run of each workload)\n\n", r.cfg.Replication)
	} else {
		b.WriteString("\n## Profiles of the Sluice broker (BENCH_PROFILE=1, first run of each workload)\n\n")
	}
	b.WriteString("CPU profile of each phase and the heap allocated during it (the difference of two allocation profiles; " +
		"Go samples allocations every 512 KiB, so counts are estimates). Profile files are in the work directory's `profiles/`.\n\n")
	b.WriteString("| workload | phase | CPU sampled | allocated | per record |\n|---|---|---|---|---|\n")
	for _, p := range r.profiles {
		if p.Summary == nil {
			fmt.Fprintf(b, "| %s | %s | — | — | %s |\n", p.Workload, p.Phase, oneLineErr(p.Err))
			continue
		}
		per := "—"
		if p.Records > 0 {
			per = fmt.Sprintf("%.1f B, %.4f objects", p.Summary.AllocBytes/float64(p.Records), p.Summary.AllocObjects/float64(p.Records))
		}
		fmt.Fprintf(b, "| %s | %s | %.2f s | %.1f MiB, %.0f objects | %s |\n", p.Workload, p.Phase,
			p.Summary.CPUSampledSec, p.Summary.AllocBytes/(1<<20), p.Summary.AllocObjects, per)
	}
	b.WriteString("\n<details><summary>top functions</summary>\n\n")
	for _, p := range r.profiles {
		if p.Summary == nil {
			continue
		}
		fmt.Fprintf(b, "#### %s — %s\n\nCPU:\n\n```\n%s```\n\nAllocated space:\n\n```\n%s```\n\n", p.Workload, p.Phase, p.Summary.CPUTop, p.Summary.AllocTop)
	}
	b.WriteString("</details>\n")
}
