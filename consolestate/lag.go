package consolestate

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sluice-io/sluice/consoledb"
)

// LagHistory is the lag history of a cluster's consoles. It is the lag
// sampler's store (InsertLagSamples, PruneLagSamples, SeeBrokers): the
// leading console publishes each round to the lag history topic; every
// console keeps its recent rounds in memory, so the one that takes over
// publishes the rounds it sampled after the last one published, and the
// chart has no hole across a failover. Run materialises the topic into
// this host's lag_samples, with the applied offset, in one transaction per
// batch.
type LagHistory struct {
	log     consoledb.Log
	console *consoledb.Console
	host    int32
	leader  func() bool
	logger  *slog.Logger
	window  time.Duration

	mu         sync.Mutex
	ring       []consoledb.LagRound // recent rounds, oldest first. Lock mu.
	lastAt     time.Time            // newest round applied from the topic. Lock mu.
	published  time.Time            // newest round this host published. Lock mu.
	applied    int64                // Lock mu.
	end        int64                // Lock mu.
	lastOK     time.Time            // Lock mu.
	lastErr    error                // Lock mu.
	errSince   time.Time            // Lock mu.
	unreadable int64                // Lock mu.
}

// LagHistoryConfig configures a LagHistory.
type LagHistoryConfig struct {
	Log     consoledb.Log // the lag history topic
	Console *consoledb.Console
	Host    int32       // this host's broker id, in each record
	Leader  func() bool // whether this console publishes (nil: always)
	Logger  *slog.Logger
	// Window is how long rounds are kept in memory to fill a failover's
	// gap (default 15 minutes).
	Window time.Duration
}

// NewLagHistory returns the lag history; Run consumes it.
func NewLagHistory(cfg LagHistoryConfig) *LagHistory {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Window <= 0 {
		cfg.Window = 15 * time.Minute
	}
	if cfg.Leader == nil {
		cfg.Leader = func() bool { return true }
	}
	return &LagHistory{log: cfg.Log, console: cfg.Console, host: cfg.Host, leader: cfg.Leader,
		logger: cfg.Logger.With("component", "console-lag-history"), window: cfg.Window, applied: -1, end: -1}
}

// lagRecord is a record of the lag history topic.
type lagRecord struct {
	V       int         `json:"v"`
	At      int64       `json:"at"` // Unix milliseconds
	Host    int32       `json:"host"`
	Samples []lagSample `json:"samples"`
}

type lagSample struct {
	Group string `json:"g"`
	Topic string `json:"t"`
	Lag   int64  `json:"lag"`
	LagMS int64  `json:"ms"`
}

// samplesPerRecord bounds a record (a few hundred kilobytes).
const samplesPerRecord = 2000

func encodeRound(r consoledb.LagRound, host int32) ([]consoledb.Record, error) {
	var out []consoledb.Record
	for i := 0; i == 0 || i < len(r.Samples); i += samplesPerRecord {
		part := r.Samples[i:min(i+samplesPerRecord, len(r.Samples))]
		rec := lagRecord{V: 1, At: r.At.UnixMilli(), Host: host, Samples: make([]lagSample, len(part))}
		for j, s := range part {
			rec.Samples[j] = lagSample{Group: s.Group, Topic: s.Topic, Lag: s.Lag, LagMS: s.LagTime.Milliseconds()}
		}
		b, err := json.Marshal(rec)
		if err != nil {
			return nil, err
		}
		out = append(out, consoledb.Record{Value: b})
	}
	return out, nil
}

// InsertLagSamples publishes the round (and, on a console that just took
// over, the rounds it sampled since the last published one) while this
// console leads; otherwise it keeps the round in memory.
func (h *LagHistory) InsertLagSamples(ctx context.Context, at time.Time, samples []consoledb.LagSample) error {
	h.mu.Lock()
	h.ring = append(h.ring, consoledb.LagRound{At: at, Samples: samples})
	for len(h.ring) > 0 && at.Sub(h.ring[0].At) > h.window {
		h.ring = h.ring[1:]
	}
	if !h.leader() {
		h.mu.Unlock()
		return nil
	}
	since := h.lastAt
	if h.published.After(since) {
		since = h.published
	}
	var send []consoledb.LagRound
	for _, r := range h.ring {
		if r.At.After(since) {
			send = append(send, r)
		}
	}
	h.mu.Unlock()
	var recs []consoledb.Record
	for _, r := range send {
		rs, err := encodeRound(r, h.host)
		if err != nil {
			return err
		}
		recs = append(recs, rs...)
	}
	if len(send) > 1 {
		h.logger.Info("publishing lag rounds sampled while another console led", "rounds", len(send)-1, "since", since)
	}
	if _, err := h.log.Append(ctx, recs); err != nil {
		return fmt.Errorf("publish lag history: %w", err)
	}
	h.mu.Lock()
	h.published = at
	h.mu.Unlock()
	return nil
}

// PruneLagSamples prunes this host's lag_samples (the topic keeps its own
// retention).
func (h *LagHistory) PruneLagSamples(ctx context.Context, before time.Time) (int64, error) {
	return h.console.PruneLagSamples(ctx, before)
}

// SeeBrokers records the brokers this host's console sees (local to the
// host).
func (h *LagHistory) SeeBrokers(ctx context.Context, brokers []consoledb.KnownBroker) error {
	return h.console.SeeBrokers(ctx, brokers)
}

// Run consumes the lag history topic into lag_samples until ctx ends.
func (h *LagHistory) Run(ctx context.Context) {
	next := int64(0)
	if off, err := h.console.AppliedOffset(ctx, LagTopic); err == nil {
		next = off + 1
		h.mu.Lock()
		h.applied = off
		h.mu.Unlock()
	}
	if at, err := h.console.LastLagSample(ctx); err == nil {
		h.mu.Lock()
		h.lastAt = at
		h.mu.Unlock()
	}
	backoff := 100 * time.Millisecond
	probe := time.Now()
	for ctx.Err() == nil {
		if time.Since(probe) > 2*time.Second {
			probe = time.Now()
			pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			end, _, err := h.log.End(pctx)
			cancel()
			h.note(err, end)
			if err == nil && end < next {
				// The topic was recreated (or shortened below what this host
				// applied): read it again from its start.
				h.logger.Warn("the lag history topic ends before what this host applied: reading it from the start", "end", end, "applied", next-1)
				next = 0
			}
		}
		recs, err := h.log.Fetch(ctx, next)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			h.note(err, -1)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 2*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		h.note(nil, -1)
		if len(recs) == 0 {
			continue
		}
		var rounds []consoledb.LagRound
		var newest time.Time
		for _, rec := range recs {
			var lr lagRecord
			if err := json.Unmarshal(rec.Value, &lr); err != nil || lr.V != 1 {
				h.mu.Lock()
				h.unreadable++
				h.mu.Unlock()
				continue
			}
			r := consoledb.LagRound{At: time.UnixMilli(lr.At).UTC(), Samples: make([]consoledb.LagSample, len(lr.Samples))}
			for i, s := range lr.Samples {
				r.Samples[i] = consoledb.LagSample{Group: s.Group, Topic: s.Topic, Lag: s.Lag, LagTime: time.Duration(s.LagMS) * time.Millisecond}
			}
			rounds = append(rounds, r)
			if r.At.After(newest) {
				newest = r.At
			}
		}
		last := recs[len(recs)-1].Offset
		if err := h.console.ApplyLagHistory(ctx, LagTopic, last, rounds); err != nil {
			if ctx.Err() == nil {
				h.logger.Error("store lag history", "err", err)
			}
			continue
		}
		next = last + 1
		h.mu.Lock()
		h.applied = last
		h.end = max(h.end, last+1)
		if newest.After(h.lastAt) {
			h.lastAt = newest
		}
		h.mu.Unlock()
	}
}

func (h *LagHistory) note(err error, end int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	if err != nil {
		if h.errSince.IsZero() {
			h.errSince = now
			h.logger.Warn("lag history topic unreachable", "err", err)
		}
		h.lastErr = err
		return
	}
	h.lastOK, h.lastErr, h.errSince = now, nil, time.Time{}
	if end >= 0 {
		h.end = end
	}
}

// Status reports where this host stands in the lag history topic.
func (h *LagHistory) Status() consoledb.ReplicaStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := consoledb.ReplicaStatus{Topic: LagTopic, Applied: h.applied, End: h.end, Lag: -1, Since: h.errSince, LastOK: h.lastOK,
		Started: true, Skipped: h.unreadable, Reachable: h.errSince.IsZero() || time.Since(h.errSince) < 10*time.Second}
	if h.lastErr != nil {
		st.Err = h.lastErr.Error()
	}
	if h.end >= 0 {
		st.Lag = max(0, h.end-(h.applied+1))
		if h.applied+1 >= h.end {
			st.CaughtUp = h.lastOK
		}
	}
	return st
}
