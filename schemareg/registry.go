package schemareg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/schemareg/schema"
)

// Leader tells whether this process writes the registry, and where the
// writer is. In a cluster the appliance backs it with a ZooKeeper election
// (/schema_registry_leader); nil means this process is the only registry.
type Leader interface {
	IsLeader() bool
	// LeaderURL is the writer's base URL (scheme://host:port), "" when
	// unknown.
	LeaderURL() string
}

// Config configures a Registry.
type Config struct {
	Log    Log          // required
	Leader Leader       // nil: always the writer
	Logger *slog.Logger // nil: discard
	// Metrics records requests and schema counts; nil records nothing.
	Metrics *metrics.SchemaRegistry
	// Auth checks HTTP basic credentials; nil serves everyone.
	Auth Authenticator
	// Forward is the client writes are forwarded to the leader with;
	// nil = a client with a 30s timeout.
	Forward *http.Client
	// PeerKey is a secret every registry of the cluster shares. A write
	// this registry forwards on its own behalf (a delete from the
	// console's pages, which has no user's credentials to pass on) is
	// signed with it, and a signed write is accepted without credentials
	// when Auth is set. Nil: such writes are not signed, and a leader with
	// Auth refuses them (401).
	PeerKey []byte
	// WriteTimeout bounds how long a write waits for the log and for the
	// view to catch up; default 30s.
	WriteTimeout time.Duration
	// MaxRequestBytes bounds a request body; default 16 MiB.
	MaxRequestBytes int64
}

// Registry is a Confluent-compatible schema registry over a Log. Make it
// with New, Start it, serve Handler, Close it.
type Registry struct {
	cfg   Config
	log   *slog.Logger
	state *state

	writeMu    sync.Mutex // one write at a time; held across the check and the append
	parseCache sync.Map   // canonical text -> *schema.Schema of stored versions (bounded: cleared at 10k)
	parseCount int64      // entries in parseCache. Lock parseMu.
	parseMu    sync.Mutex

	authCache *authCache

	cancel context.CancelFunc
	done   chan struct{}
}

// New returns a registry; Start begins reading the log.
func New(cfg Config) *Registry {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 30 * time.Second
	}
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = 16 << 20
	}
	if cfg.Forward == nil {
		cfg.Forward = &http.Client{Timeout: 30 * time.Second}
	}
	r := &Registry{cfg: cfg, log: cfg.Logger, state: newState(), authCache: newAuthCache()}
	if cfg.Metrics != nil {
		cfg.Metrics.OnCollect(func() (int, int) { return r.state.counts() })
	}
	return r
}

// Start reads the log into the view in a goroutine the registry owns.
func (r *Registry) Start(ctx context.Context) {
	ctx, r.cancel = context.WithCancel(ctx)
	r.done = make(chan struct{})
	go func() {
		defer close(r.done)
		for {
			err := r.cfg.Log.Tail(ctx, func(off int64, rec Record) { r.state.apply(off, rec, r.log) })
			if ctx.Err() != nil {
				return
			}
			r.log.Warn("schema registry: reading _schemas failed; retrying", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}()
}

// Close stops reading the log and waits for the reader.
func (r *Registry) Close() error {
	if r.cancel != nil {
		r.cancel()
		<-r.done
	}
	return nil
}

func (r *Registry) isLeader() bool { return r.cfg.Leader == nil || r.cfg.Leader.IsLeader() }

// WaitFor waits until the view has applied offset off.
func (r *Registry) WaitFor(ctx context.Context, off int64) error {
	for {
		ch := r.state.reached(off)
		if ch == nil {
			return nil
		}
		r.cfg.Log.Poke()
		select {
		case <-ch:
		case <-ctx.Done():
			return newErr(http.StatusInternalServerError, CodeOperationTimeout, "the registry's view did not reach offset %d of %s in time", off, Topic)
		case <-time.After(time.Second):
		}
	}
}

// write appends recs and waits until the view has applied them, so that
// the next check under writeMu (and the next read here) sees them.
// Lock writeMu should be held.
func (r *Registry) write(ctx context.Context, recs ...Record) (int64, error) {
	off, err := r.cfg.Log.Append(ctx, recs)
	if err != nil {
		return 0, errStore(err)
	}
	if err := r.WaitFor(ctx, off); err != nil {
		return 0, err
	}
	return off, nil
}

// catchUp reads the log to its end before a write, as Confluent's
// registry does before each write: it appends a NOOP record and waits until
// the view has applied it, so that the checks and the ids and versions
// allocated next see everything any leader wrote before (a new leader, or
// an old one that lost and regained the role). Writes are rare (schema
// registrations), so the extra record costs little. Lock writeMu should be
// held.
func (r *Registry) catchUp(ctx context.Context) error {
	_, err := r.write(ctx, noopRecord())
	return err
}

// beginWrite takes the write lock for a leader's write; the caller calls
// the returned release.
func (r *Registry) beginWrite(ctx context.Context) (func(), error) {
	r.writeMu.Lock()
	if !r.isLeader() {
		r.writeMu.Unlock()
		return nil, errNotLeader
	}
	if err := r.catchUp(ctx); err != nil {
		r.writeMu.Unlock()
		return nil, err
	}
	return r.writeMu.Unlock, nil
}

var errNotLeader = newErr(http.StatusInternalServerError, CodeUnknownLeader, "this host is not the schema registry's leader")

// parse parses a stored or submitted schema, caching stored ones.
func (r *Registry) parse(t schema.Type, text string, refs []schema.Reference) (*schema.Schema, error) {
	key := string(t) + "\x00" + fmt.Sprint(refs) + "\x00" + text
	if v, ok := r.parseCache.Load(key); ok {
		return v.(*schema.Schema), nil
	}
	resolved, err := r.state.resolve(refs, 0)
	if err != nil {
		return nil, err
	}
	s, err := schema.Parse(schema.Source{Type: t, Text: text, References: resolved})
	if err != nil {
		if errors.Is(err, schema.ErrInvalid) {
			return nil, errInvalidSchema("%v", strings.TrimPrefix(err.Error(), schema.ErrInvalid.Error()+": "))
		}
		return nil, err
	}
	r.parseMu.Lock()
	if r.parseCount >= 10000 {
		r.parseCache.Clear()
		r.parseCount = 0
	}
	r.parseCount++
	r.parseMu.Unlock()
	r.parseCache.Store(key, s)
	return s, nil
}

// Compatibility levels.
var levels = []string{"NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE"}

func parseLevel(s string) (string, bool) {
	u := strings.ToUpper(strings.TrimSpace(s))
	return u, slices.Contains(levels, u)
}

// Modes. IMPORT (writing with given ids) is not offered.
var modes = []string{"READWRITE", "READONLY"}

// SchemaRequest is the body of POST /subjects/{s}/versions, POST
// /subjects/{s} and POST /compatibility/...
type SchemaRequest struct {
	Schema     string             `json:"schema"`
	SchemaType string             `json:"schemaType,omitempty"`
	References []schema.Reference `json:"references,omitempty"`
}

func (r *Registry) parseRequest(req SchemaRequest) (*schema.Schema, schema.Type, error) {
	t, err := schema.ParseType(req.SchemaType)
	if err != nil {
		return nil, "", errInvalidSchema("%v", err)
	}
	if strings.TrimSpace(req.Schema) == "" {
		return nil, "", errInvalidSchema("empty schema")
	}
	s, err := r.parse(t, schema.Canonical(t, req.Schema), req.References)
	return s, t, err
}

func sameRefs(a, b []schema.Reference) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// findInSubject returns the version of subject holding the same schema.
func (r *Registry) findInSubject(subject string, t schema.Type, s *schema.Schema, refs []schema.Reference, deleted bool) *SchemaValue {
	r.state.mu.RLock()
	defer r.state.mu.RUnlock()
	ss := r.state.subjects[subject]
	if ss == nil {
		return nil
	}
	var best *SchemaValue
	for _, sv := range ss.versions {
		if sv.Deleted && !deleted {
			continue
		}
		if sv.Type() == t && schema.Canonical(t, sv.Schema) == s.Text && sameRefs(sv.References, refs) {
			if best == nil || sv.Version < best.Version {
				best = sv
			}
		}
	}
	return best
}

// findID returns the id the same schema has under any subject, or 0.
func (r *Registry) findID(t schema.Type, s *schema.Schema, refs []schema.Reference) int {
	r.state.mu.RLock()
	defer r.state.mu.RUnlock()
	best := 0
	for _, ss := range r.state.subjects {
		for _, sv := range ss.versions {
			if sv.Type() == t && schema.Canonical(t, sv.Schema) == s.Text && sameRefs(sv.References, refs) {
				if best == 0 || sv.ID < best {
					best = sv.ID
				}
			}
		}
	}
	return best
}

// checkCompat checks s against the subject's live versions under level:
// the latest one, or all for a transitive level. It returns the problems.
func (r *Registry) checkCompat(subject string, s *schema.Schema, level string, against []*SchemaValue) ([]string, error) {
	if level == "NONE" || len(against) == 0 {
		return nil, nil
	}
	if !strings.HasSuffix(level, "_TRANSITIVE") {
		against = against[len(against)-1:]
	}
	var msgs []string
	for _, sv := range against {
		old, err := r.parse(sv.Type(), sv.Schema, sv.References)
		if err != nil {
			return nil, fmt.Errorf("version %d of %s: %w", sv.Version, subject, err)
		}
		base := strings.TrimSuffix(level, "_TRANSITIVE")
		if base == "BACKWARD" || base == "FULL" {
			for _, m := range schema.Compatible(s, old, schema.Backward) {
				msgs = append(msgs, fmt.Sprintf("version %d: backward: %s", sv.Version, m))
			}
		}
		if base == "FORWARD" || base == "FULL" {
			for _, m := range schema.Compatible(s, old, schema.Forward) {
				msgs = append(msgs, fmt.Sprintf("version %d: forward: %s", sv.Version, m))
			}
		}
	}
	if r.cfg.Metrics != nil {
		r.cfg.Metrics.CompatibilityChecked(len(msgs) == 0)
	}
	return msgs, nil
}

// liveVersions returns a subject's live versions in order.
func (r *Registry) liveVersions(subject string) []*SchemaValue {
	r.state.mu.RLock()
	defer r.state.mu.RUnlock()
	ss := r.state.subjects[subject]
	if ss == nil {
		return nil
	}
	var out []*SchemaValue
	for _, v := range ss.sortedVersions(false) {
		out = append(out, ss.versions[v])
	}
	return out
}

// Register registers req under subject (idempotent: the same schema
// already in the subject answers its id). Leader only.
func (r *Registry) Register(ctx context.Context, subject string, req SchemaRequest) (int, error) {
	if err := validSubject(subject); err != nil {
		return 0, err
	}
	if r.state.modeOf(subject) == "READONLY" {
		return 0, errReadOnly(subject)
	}
	release, err := r.beginWrite(ctx)
	if err != nil {
		return 0, err
	}
	defer release()
	s, t, err := r.parseRequest(req)
	if err != nil {
		return 0, err
	}
	if sv := r.findInSubject(subject, t, s, req.References, false); sv != nil {
		return sv.ID, nil
	}
	msgs, err := r.checkCompat(subject, s, r.state.compatibility(subject), r.liveVersions(subject))
	if err != nil {
		return 0, err
	}
	if len(msgs) > 0 {
		return 0, errIncompatible(msgs)
	}
	id := r.findID(t, s, req.References)
	r.state.mu.RLock()
	if id == 0 {
		id = r.state.maxID + 1
	}
	version := 1
	if ss := r.state.subjects[subject]; ss != nil {
		for v := range ss.versions {
			version = max(version, v+1)
		}
	}
	r.state.mu.RUnlock()
	st := ""
	if t != schema.Avro {
		st = string(t)
	}
	if _, err := r.write(ctx, schemaRecord(SchemaValue{Subject: subject, Version: version, ID: id, SchemaType: st,
		References: req.References, Schema: s.Text})); err != nil {
		return 0, err
	}
	r.log.Info("schema registered", "subject", subject, "version", version, "id", id, "type", t)
	return id, nil
}

// Lookup finds the version of subject holding req's schema.
func (r *Registry) Lookup(subject string, req SchemaRequest, deleted bool) (*SchemaValue, error) {
	if _, ok := r.state.version(subject, -1, true); !ok {
		return nil, errSubjectNotFound(subject)
	}
	s, t, err := r.parseRequest(req)
	if err != nil {
		return nil, err
	}
	sv := r.findInSubject(subject, t, s, req.References, deleted)
	if sv == nil {
		return nil, errSchemaNotFound()
	}
	return sv, nil
}

// CheckCompatibility checks req against version v of subject (-1 latest,
// 0 = every version the subject's level compares with).
func (r *Registry) CheckCompatibility(subject string, v int, req SchemaRequest) ([]string, error) {
	s, _, err := r.parseRequest(req)
	if err != nil {
		return nil, err
	}
	level := r.state.compatibility(subject)
	live := r.liveVersions(subject)
	if v != 0 {
		sv, ok := r.state.version(subject, v, false)
		if !ok {
			return nil, errSubjectNotFound(subject)
		}
		if sv == nil {
			return nil, errVersionNotFound(v)
		}
		live = []*SchemaValue{sv}
		level = strings.TrimSuffix(level, "_TRANSITIVE")
	}
	return r.checkCompat(subject, s, level, live)
}

// DeleteVersion soft- or hard-deletes version v (-1 latest) of subject.
// On a registry that is not the leader it is forwarded to the leader (see
// forwardCall), as the REST API's writes are, and returns once this
// registry's view has the leader's write.
func (r *Registry) DeleteVersion(ctx context.Context, subject string, v int, permanent bool) (int, error) {
	if !r.isLeader() {
		var out int
		err := r.forwardCall(ctx, http.MethodDelete, "/subjects/"+url.PathEscape(subject)+"/versions/"+strconv.Itoa(v), permanent, &out)
		return out, err
	}
	return r.deleteVersion(ctx, subject, v, permanent)
}

func (r *Registry) deleteVersion(ctx context.Context, subject string, v int, permanent bool) (int, error) {
	if r.state.modeOf(subject) == "READONLY" {
		return 0, errReadOnly(subject)
	}
	release, err := r.beginWrite(ctx)
	if err != nil {
		return 0, err
	}
	defer release()
	sv, ok := r.state.version(subject, v, permanent)
	if !ok {
		return 0, errSubjectNotFound(subject)
	}
	if sv == nil {
		if v > 0 {
			if any, _ := r.state.version(subject, v, true); any != nil && any.Deleted {
				return 0, newErr(http.StatusNotFound, CodeVersionSoftDeleted,
					"Subject '%s' Version %d was soft deleted.Set permanent=true to delete permanently", subject, v)
			}
		}
		return 0, errVersionNotFound(v)
	}
	if ids := r.state.referencedBy(subject, sv.Version, permanent); len(ids) > 0 {
		return 0, newErr(http.StatusUnprocessableEntity, CodeReferenceExists,
			"One or more references exist to the schema {magic=1,keytype=SCHEMA,subject=%s,version=%d}.", subject, sv.Version)
	}
	if permanent {
		if !sv.Deleted {
			return 0, newErr(http.StatusNotFound, CodeVersionNotSoftDeleted,
				"Subject '%s' Version %d was not deleted first before being permanently deleted", subject, sv.Version)
		}
		recs := []Record{{Key: MarshalKey(Key{Type: KeySchema, Subject: subject, Version: sv.Version})}}
		r.state.mu.RLock()
		last := len(r.state.subjects[subject].versions) == 1
		cfg, mode := r.state.subjects[subject].config, r.state.subjects[subject].mode
		r.state.mu.RUnlock()
		if last && cfg != "" {
			recs = append(recs, configRecord(subject, ""))
		}
		if last && mode != "" {
			recs = append(recs, modeRecord(subject, ""))
		}
		if _, err := r.write(ctx, recs...); err != nil {
			return 0, err
		}
		return sv.Version, nil
	}
	c := *sv
	c.Deleted = true
	if _, err := r.write(ctx, schemaRecord(c)); err != nil {
		return 0, err
	}
	return sv.Version, nil
}

// DeleteSubject soft-deletes every live version of subject, or hard-deletes
// every (already soft-deleted) version. It returns the versions deleted.
// On a registry that is not the leader it is forwarded to the leader, as
// DeleteVersion is.
func (r *Registry) DeleteSubject(ctx context.Context, subject string, permanent bool) ([]int, error) {
	if !r.isLeader() {
		var out []int
		err := r.forwardCall(ctx, http.MethodDelete, "/subjects/"+url.PathEscape(subject), permanent, &out)
		return out, err
	}
	return r.deleteSubject(ctx, subject, permanent)
}

func (r *Registry) deleteSubject(ctx context.Context, subject string, permanent bool) ([]int, error) {
	if r.state.modeOf(subject) == "READONLY" {
		return nil, errReadOnly(subject)
	}
	release, err := r.beginWrite(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	r.state.mu.RLock()
	ss := r.state.subjects[subject]
	var all, live []int
	var cfg, mode string
	if ss != nil {
		all, live = ss.sortedVersions(true), ss.sortedVersions(false)
		cfg, mode = ss.config, ss.mode
	}
	r.state.mu.RUnlock()
	if len(all) == 0 {
		return nil, errSubjectNotFound(subject)
	}
	if !permanent && len(live) == 0 {
		return nil, newErr(http.StatusNotFound, CodeSubjectSoftDeleted,
			"Subject '%s' was soft deleted.Set permanent=true to delete permanently", subject)
	}
	if permanent && len(live) > 0 {
		return nil, newErr(http.StatusNotFound, CodeSubjectNotSoftDeleted,
			"Subject '%s' was not deleted first before being permanently deleted", subject)
	}
	check := live
	if permanent {
		check = all
	}
	for _, v := range check {
		for _, id := range r.state.referencedBy(subject, v, permanent) {
			for _, u := range r.state.usesOf(id, permanent) {
				if u.Subject != subject {
					return nil, newErr(http.StatusUnprocessableEntity, CodeReferenceExists,
						"One or more references exist to the schema {magic=1,keytype=SCHEMA,subject=%s,version=%d}.", subject, v)
				}
			}
		}
	}
	if !permanent {
		if _, err := r.write(ctx, deleteSubjectRecord(subject, live[len(live)-1])); err != nil {
			return nil, err
		}
		return live, nil
	}
	var recs []Record
	for i := len(all) - 1; i >= 0; i-- {
		recs = append(recs, Record{Key: MarshalKey(Key{Type: KeySchema, Subject: subject, Version: all[i]})})
	}
	if cfg != "" {
		recs = append(recs, configRecord(subject, ""))
	}
	if mode != "" {
		recs = append(recs, modeRecord(subject, ""))
	}
	if _, err := r.write(ctx, recs...); err != nil {
		return nil, err
	}
	return all, nil
}

// SetConfig sets the compatibility level of subject ("" = global), or
// removes a subject's own level when level is "".
func (r *Registry) SetConfig(ctx context.Context, subject, level string) error {
	release, err := r.beginWrite(ctx)
	if err != nil {
		return err
	}
	defer release()
	_, err = r.write(ctx, configRecord(subject, level))
	return err
}

// SetMode sets the mode of subject ("" = global), or removes a subject's
// own mode when mode is "".
func (r *Registry) SetMode(ctx context.Context, subject, mode string) error {
	release, err := r.beginWrite(ctx)
	if err != nil {
		return err
	}
	defer release()
	_, err = r.write(ctx, modeRecord(subject, mode))
	return err
}

func validSubject(s string) error {
	if s == "" || len(s) > 1024 || strings.ContainsFunc(s, func(c rune) bool { return c < 0x20 || c == 0x7f }) {
		return newErr(http.StatusUnprocessableEntity, CodeInvalidSubject, "The specified subject is not a valid subject name")
	}
	return nil
}
