package security

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The authorizer: Kafka's AclAuthorizer (kafka.security.authorizer) over
// the ACLs of a Source, decided the way AclAuthorizer.authorizeAction
// decides:
//
//  1. A super user (super.users) may do everything.
//  2. The ACLs that apply to a resource are those on its literal name, on
//     the literal "*" of its type, and on every prefixed pattern its name
//     starts with. When there are none at all (for anyone),
//     allow.everyone.if.no.acl.found decides.
//  3. A matching Deny wins: its principal is the caller's or User:*, its
//     host the caller's address or "*", its operation the one asked or All.
//  4. Otherwise a matching Allow is needed. Allowing Read, Write, Delete or
//     Alter allows Describe too, and AlterConfigs allows DescribeConfigs;
//     the implication is for Allow only (a Deny of Read does not deny
//     Describe).
//
// The ACLs are held in an immutable snapshot, rebuilt and swapped
// atomically when they change; a decision reads one snapshot and allocates
// nothing: two map lookups for the literal names, one per distinct prefix
// length for the prefixed patterns, and in each set found only the entries
// of the caller's principal and of User:*.

// Source is where the ACLs are kept (the metadata store: ZooKeeper's
// /kafka-acl nodes, or the standalone file).
type Source interface {
	// ACLs returns every binding the store holds now (from its cache).
	ACLs(ctx context.Context) ([]ACL, error)
	// WatchACLs signals (coalesced) when the ACLs may have changed, on
	// this broker or another, until ctx ends; then it is closed.
	WatchACLs(ctx context.Context) <-chan struct{}
}

// AuthorizerConfig is the authorizer's part of the broker configuration.
type AuthorizerConfig struct {
	// SuperUsers are super.users: principals that may do everything.
	SuperUsers []Principal
	// AllowEveryoneIfNoACLFound is allow.everyone.if.no.acl.found: a
	// resource no ACL applies to is open to everyone (default false:
	// closed to all but super users).
	AllowEveryoneIfNoACLFound bool
	// Logger receives the reloads, the failures to reload and the
	// denials (INFO, at most DenialLogPerSecond lines a second, as Kafka's
	// kafka.authorizer.logger logs them).
	Logger *slog.Logger
	// Denials, when set, resolves the counter of the denials of an
	// operation on a resource type (sluice_broker_authorization_denials_total),
	// named as Kafka names them ("Read", "Topic"). The authorizer resolves
	// every supported pair once, when it is made, and keeps them, so that
	// counting a denial allocates nothing.
	Denials func(operation, resourceType string) Counter
}

// Counter is a monotonic counter (a prometheus.Counter).
type Counter interface{ Inc() }

// DenialLogPerSecond bounds the denial lines logged a second; the next
// line let through says how many were left out, so a client retrying a
// denied request in a loop cannot flood the log.
const DenialLogPerSecond = 10

// Authorizer decides whether a principal may perform an operation on a
// resource. Safe for concurrent use; its decisions do not allocate.
type Authorizer struct {
	super    map[Principal]struct{}
	allowAll bool
	log      *slog.Logger
	src      Source

	// denied[op][rt] counts the denials of op on rt (nil without
	// AuthorizerConfig.Denials, or for a pair no resource type supports:
	// resolved when it happens).
	denied  [numOperations][numResourceTypes]Counter
	denials func(operation, resourceType string) Counter
	denyLog denialLog

	snap atomic.Pointer[snapshot]

	reloadMu sync.Mutex // one reload at a time, so a later read is never replaced by an earlier one
	cancel   context.CancelFunc
	done     chan struct{}
}

// NewAuthorizer returns an authorizer with no ACLs yet: Start loads them
// from src and follows its changes; SetACLs replaces them (tests, a
// Source-less use).
func NewAuthorizer(cfg AuthorizerConfig, src Source) *Authorizer {
	a := &Authorizer{super: map[Principal]struct{}{}, allowAll: cfg.AllowEveryoneIfNoACLFound, log: cfg.Logger, src: src}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	a.log = a.log.With("component", "authorizer")
	for _, p := range cfg.SuperUsers {
		a.super[p] = struct{}{}
	}
	if a.denials = cfg.Denials; a.denials != nil {
		for rt := ResourceTopic; rt < numResourceTypes; rt++ {
			for _, op := range SupportedOperations(rt) {
				if op != OpAll {
					a.denied[op][rt] = a.denials(op.String(), rt.String())
				}
			}
		}
	}
	a.snap.Store(buildSnapshot(nil))
	return a
}

// Start loads the ACLs and keeps them current from the source's watch
// until Close. A failed first load is an error (the broker does not serve
// with ACLs it could not read); later failures are logged and retried.
func (a *Authorizer) Start(ctx context.Context) error {
	if a.src == nil {
		return errors.New("authorizer: no ACL source")
	}
	wctx, cancel := context.WithCancel(context.Background())
	changes := a.src.WatchACLs(wctx)
	if err := a.Reload(ctx); err != nil {
		cancel()
		return err
	}
	a.cancel, a.done = cancel, make(chan struct{})
	go a.follow(wctx, changes)
	return nil
}

// follow reloads on every change signal; a failed reload is retried.
func (a *Authorizer) follow(ctx context.Context, changes <-chan struct{}) {
	defer close(a.done)
	var retry <-chan time.Time
	for {
		select {
		case _, ok := <-changes:
			if !ok {
				return
			}
		case <-retry:
		case <-ctx.Done():
			return
		}
		retry = nil
		if err := a.Reload(ctx); err != nil && ctx.Err() == nil {
			a.log.Warn("reloading the ACLs failed; retrying", "err", err)
			retry = time.After(time.Second)
		}
	}
}

// Close stops following the source and waits for it.
func (a *Authorizer) Close() {
	if a.cancel != nil {
		a.cancel()
		<-a.done
		a.cancel = nil
	}
}

// Reload reads the source's ACLs now and swaps them in (after a change
// this broker made: CreateAcls, DeleteAcls read their own writes). Without
// a source (SetACLs only) there is nothing to read.
func (a *Authorizer) Reload(ctx context.Context) error {
	if a.src == nil {
		return nil
	}
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	acls, err := a.src.ACLs(ctx)
	if err != nil {
		return err
	}
	a.snap.Store(buildSnapshot(acls))
	return nil
}

// SetACLs replaces the ACLs.
func (a *Authorizer) SetACLs(acls []ACL) {
	a.reloadMu.Lock()
	a.snap.Store(buildSnapshot(acls))
	a.reloadMu.Unlock()
}

// ACLs returns the bindings the filter selects, sorted by resource, from
// the snapshot in force (DescribeAcls).
func (a *Authorizer) ACLs(f Filter) []ACL {
	var out []ACL
	for _, acl := range a.snap.Load().all {
		if f.Matches(acl) {
			out = append(out, acl)
		}
	}
	return out
}

// IsSuperUser reports whether p is in super.users.
func (a *Authorizer) IsSuperUser(p Principal) bool {
	_, ok := a.super[p]
	return ok
}

// impliedBy[op] is the set (bit per operation) of operations whose Allow
// allows op: op itself, All, and for Describe and DescribeConfigs the
// operations that imply them (AclAuthorizer.authorizeAction's allowOps).
var impliedBy = func() (m [numOperations]uint32) {
	for op := range m {
		m[op] = 1<<op | 1<<OpAll
	}
	m[OpDescribe] |= 1<<OpRead | 1<<OpWrite | 1<<OpDelete | 1<<OpAlter
	m[OpDescribeConfigs] |= 1 << OpAlterConfigs
	return m
}()

// Authorize decides whether p, connected from host (the client's IP
// address, as HostOf gives it), may perform op on the resource of type rt
// called name. A denial is counted and logged (see Denials and Logger);
// an allowed request costs the decision only and does not allocate.
func (a *Authorizer) Authorize(p Principal, host string, op Operation, rt ResourceType, name string) bool {
	if a.decide(p, host, op, rt, name) {
		return true
	}
	a.deny(p, host, op, rt, name)
	return false
}

// Permits is Authorize without counting or logging a denial, for the
// checks Kafka makes with logIfDenied=false: filtering a listing (the
// topics of an all-topics Metadata, the groups of ListGroups), a first
// check that a second one may still grant (Create on the cluster before
// Create on the topic), the *_authorized_operations bit sets. Such a "no"
// refuses nothing.
func (a *Authorizer) Permits(p Principal, host string, op Operation, rt ResourceType, name string) bool {
	return a.decide(p, host, op, rt, name)
}

// decide is the decision of Authorize, without its side effects.
func (a *Authorizer) decide(p Principal, host string, op Operation, rt ResourceType, name string) bool {
	if _, ok := a.super[p]; ok {
		return true
	}
	if op <= OpAny || op >= numOperations || rt <= ResourceAny || rt >= numResourceTypes {
		return false
	}
	s := a.snap.Load()
	var d decision
	d.p, d.host, d.op, d.allowOps = p, host, op, impliedBy[op]
	if set := s.literal[rt][name]; set != nil {
		d.visit(set)
	}
	if name != Wildcard {
		if set := s.literal[rt][Wildcard]; set != nil {
			d.visit(set)
		}
	}
	px := &s.prefixed[rt]
	for _, n := range px.lengths {
		if n > len(name) {
			break
		}
		if set := px.sets[name[:n]]; set != nil {
			d.visit(set)
		}
	}
	if !d.found {
		return a.allowAll
	}
	return d.allow && !d.deny
}

// AuthorizedOperations returns the bit set (1<<code) of the operations of
// rt's SupportedOperations that p may perform on name (Kafka's
// AuthHelper.authorizedOperations: the *_authorized_operations fields).
func (a *Authorizer) AuthorizedOperations(p Principal, host string, rt ResourceType, name string) int32 {
	var bits int32
	for _, op := range SupportedOperations(rt) {
		if op != OpAll && a.decide(p, host, op, rt, name) {
			bits |= 1 << op
		}
	}
	return bits
}

// AuthorizeByResourceType decides whether p may perform op on some
// resource of type rt (Kafka's Authorizer.authorizeByResourceType, which
// InitProducerId asks with Write on Topic, KIP-679): a super user may; a
// literal Deny on "*" denies; allow.everyone.if.no.acl.found allows;
// otherwise some Allow of op (or All) must apply to a literal name or a
// prefix that no Deny dominates (a denied literal of the same name, or a
// denied prefix of it). A denial is counted and logged as Authorize's.
func (a *Authorizer) AuthorizeByResourceType(p Principal, host string, op Operation, rt ResourceType) bool {
	if a.byResourceType(p, host, op, rt) {
		return true
	}
	a.deny(p, host, op, rt, "")
	return false
}

func (a *Authorizer) byResourceType(p Principal, host string, op Operation, rt ResourceType) bool {
	if a.IsSuperUser(p) {
		return true
	}
	if rt <= ResourceAny || rt >= numResourceTypes {
		return false
	}
	s := a.snap.Load()
	matching := func(perm Permission, pattern PatternType) map[string]bool {
		out := map[string]bool{}
		for _, acl := range s.all {
			e := acl.Entry
			if acl.Resource.Type != rt || acl.Resource.Pattern != pattern || e.Permission != perm {
				continue
			}
			if e.Operation != op && e.Operation != OpAll {
				continue
			}
			if e.Host != Wildcard && CanonicalHost(e.Host) != host {
				continue
			}
			if pp, err := ParsePrincipal(e.Principal); err != nil || (pp != p && pp != WildcardPrincipal) {
				continue
			}
			out[acl.Resource.Name] = true
		}
		return out
	}
	denyLiterals := matching(Deny, PatternLiteral)
	if denyLiterals[Wildcard] {
		return false
	}
	if a.allowAll {
		return true
	}
	denyPrefixes := matching(Deny, PatternPrefixed)
	allowLiterals := matching(Allow, PatternLiteral)
	allowPrefixes := matching(Allow, PatternPrefixed)
	dominated := func(name string) bool {
		for d := range denyPrefixes {
			if strings.HasPrefix(name, d) {
				return true
			}
		}
		return false
	}
	for prefix := range allowPrefixes {
		if !dominated(prefix) {
			return true
		}
	}
	for lit := range allowLiterals {
		if lit == Wildcard || !denyLiterals[lit] && !dominated(lit) {
			return true
		}
	}
	return false
}

// deny counts and logs a denial of op on the resource of type rt called
// name ("" for any resource of the type).
func (a *Authorizer) deny(p Principal, host string, op Operation, rt ResourceType, name string) {
	if op <= OpAny || op >= numOperations || rt <= ResourceAny || rt >= numResourceTypes {
		return // not a request a handler makes
	}
	if a.denials != nil {
		c := a.denied[op][rt]
		if c == nil {
			c = a.denials(op.String(), rt.String())
		}
		c.Inc()
	}
	suppressed, ok := a.denyLog.allow(time.Now())
	if !ok {
		return
	}
	resource := rt.String() + ":" + name
	if name == "" {
		resource = "any " + rt.String()
	}
	args := []any{"principal", p.String(), "operation", op.String(), "host", host, "resource", resource}
	if suppressed > 0 {
		args = append(args, "suppressed", suppressed)
	}
	a.log.Info("authorization denied", args...)
}

// denialLog lets DenialLogPerSecond denial lines through a second and
// counts the others, which the next line let through reports.
type denialLog struct {
	mu      sync.Mutex
	window  time.Time // start of the current second. Lock mu.
	n       int       // lines let through in it. Lock mu.
	dropped int64     // lines left out since the last one let through. Lock mu.
}

func (l *denialLog) allow(now time.Time) (suppressed int64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.window) >= time.Second {
		l.window, l.n = now, 0
	}
	if l.n >= DenialLogPerSecond {
		l.dropped++
		return 0, false
	}
	l.n++
	suppressed, l.dropped = l.dropped, 0
	return suppressed, true
}

// decision gathers what the ACL sets of one resource say of one request.
type decision struct {
	p        Principal
	host     string
	op       Operation
	allowOps uint32
	found    bool // some ACL (of anyone) applies to the resource
	deny     bool
	allow    bool
}

func (d *decision) visit(set *entrySet) {
	d.found = true
	d.check(set.byPrincipal[d.p])
	d.check(set.anyone)
}

func (d *decision) check(entries []entry) {
	for i := range entries {
		e := &entries[i]
		if e.host != Wildcard && e.host != d.host {
			continue
		}
		switch e.perm {
		case Deny:
			if e.op == d.op || e.op == OpAll {
				d.deny = true
			}
		case Allow:
			if d.allowOps&(1<<e.op) != 0 {
				d.allow = true
			}
		}
	}
}

// snapshot is one immutable generation of the ACLs, indexed for Authorize.
type snapshot struct {
	literal  [numResourceTypes]map[string]*entrySet // by type, then exact name ("*" included)
	prefixed [numResourceTypes]prefixIndex
	all      []ACL  // every binding, sorted (DescribeAcls, AuthorizeByResourceType)
	gen      uint64 // unique to the snapshot (Generation)
}

// snapshotGens numbers the snapshots.
var snapshotGens atomic.Uint64

// Generation identifies the ACLs in force: it changes whenever they are
// replaced (a reload, SetACLs). A fetch session's partitions are checked
// again when it changed since the session's last fetch.
func (a *Authorizer) Generation() uint64 { return a.snap.Load().gen }

// prefixIndex holds the prefixed patterns of one resource type: the sets
// by prefix, and the distinct prefix lengths in increasing order, so a
// name is matched with one lookup per length.
type prefixIndex struct {
	sets    map[string]*entrySet
	lengths []int
}

// entrySet is the entries of one resource pattern, by principal.
type entrySet struct {
	byPrincipal map[Principal][]entry
	anyone      []entry // User:*
}

type entry struct {
	host string // canonical (CanonicalHost) or "*"
	op   Operation
	perm Permission
}

func buildSnapshot(acls []ACL) *snapshot {
	s := &snapshot{all: slices.Clone(acls), gen: snapshotGens.Add(1)}
	SortACLs(s.all)
	set := func(m map[string]*entrySet, name string) *entrySet {
		es := m[name]
		if es == nil {
			es = &entrySet{byPrincipal: map[Principal][]entry{}}
			m[name] = es
		}
		return es
	}
	for _, acl := range s.all {
		r, e := acl.Resource, acl.Entry
		if r.Type <= ResourceAny || r.Type >= numResourceTypes || e.Operation <= OpAny || e.Operation >= numOperations ||
			(e.Permission != Allow && e.Permission != Deny) {
			continue
		}
		p, err := ParsePrincipal(e.Principal)
		if err != nil {
			continue // Validate keeps these out; one read from elsewhere matches no one
		}
		var es *entrySet
		switch r.Pattern {
		case PatternLiteral:
			if s.literal[r.Type] == nil {
				s.literal[r.Type] = map[string]*entrySet{}
			}
			es = set(s.literal[r.Type], r.Name)
		case PatternPrefixed:
			px := &s.prefixed[r.Type]
			if px.sets == nil {
				px.sets = map[string]*entrySet{}
			}
			es = set(px.sets, r.Name)
		default:
			continue
		}
		en := entry{host: CanonicalHost(e.Host), op: e.Operation, perm: e.Permission}
		if p == WildcardPrincipal {
			es.anyone = append(es.anyone, en)
		} else {
			es.byPrincipal[p] = append(es.byPrincipal[p], en)
		}
	}
	for t := range s.prefixed {
		px := &s.prefixed[t]
		for name := range px.sets {
			if !slices.Contains(px.lengths, len(name)) {
				px.lengths = append(px.lengths, len(name))
			}
		}
		sort.Ints(px.lengths)
	}
	return s
}

// SortACLs orders bindings by resource type, pattern type, name, then
// principal, host, operation and permission: the order listings use.
func SortACLs(acls []ACL) {
	slices.SortFunc(acls, CompareACLs)
}

// CompareACLs is the order of SortACLs.
func CompareACLs(x, y ACL) int {
	a, b := x.Resource, y.Resource
	if a.Type != b.Type {
		return int(a.Type) - int(b.Type)
	}
	if a.Pattern != b.Pattern {
		return int(a.Pattern) - int(b.Pattern)
	}
	if c := strings.Compare(a.Name, b.Name); c != 0 {
		return c
	}
	e, f := x.Entry, y.Entry
	if c := strings.Compare(e.Principal, f.Principal); c != 0 {
		return c
	}
	if c := strings.Compare(e.Host, f.Host); c != 0 {
		return c
	}
	if e.Operation != f.Operation {
		return int(e.Operation) - int(f.Operation)
	}
	return int(e.Permission) - int(f.Permission)
}
