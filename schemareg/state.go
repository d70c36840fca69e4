package schemareg

import (
	"encoding/json"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/sluice-io/sluice/schemareg/schema"
)

// state is the registry's view of the _schemas topic: every record applied
// in offset order. The consume loop is its only writer; handlers read it
// under mu.
type state struct {
	mu       sync.RWMutex
	subjects map[string]*subjectState // Lock mu.
	maxID    int                      // the largest id seen. Lock mu.
	config   string                   // global compatibility; "" = BACKWARD. Lock mu.
	mode     string                   // global mode; "" = READWRITE. Lock mu.
	next     int64                    // the offset of the next record to apply. Lock mu.
	changed  chan struct{}            // closed and replaced when next moves. Lock mu.
	skipped  int64                    // records that could not be read. Lock mu.
}

type subjectState struct {
	versions map[int]*SchemaValue // every version, soft-deleted ones too
	config   string
	mode     string
}

func newState() *state {
	return &state{subjects: map[string]*subjectState{}, changed: make(chan struct{})}
}

// apply applies the record at offset off. A record that does not parse is
// skipped and counted (a copied topic may hold key types of newer
// registries); it never stops the view.
func (s *state) apply(off int64, r Record, log *slog.Logger) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer func() {
		if off >= s.next {
			s.next = off + 1
			close(s.changed)
			s.changed = make(chan struct{})
		}
	}()
	k, err := ParseKey(r.Key)
	if err != nil {
		s.skipped++
		log.Warn("_schemas: record skipped", "offset", off, "err", err)
		return
	}
	bad := func(err error) {
		s.skipped++
		log.Warn("_schemas: record skipped", "offset", off, "keytype", k.Type, "err", err)
	}
	switch k.Type {
	case KeySchema:
		if r.Value == nil {
			if ss := s.subjects[k.Subject]; ss != nil {
				delete(ss.versions, k.Version)
				s.dropIfEmpty(k.Subject)
			}
			return
		}
		var v SchemaValue
		if err := json.Unmarshal(r.Value, &v); err != nil {
			bad(err)
			return
		}
		v.Subject, v.Version = k.Subject, k.Version
		ss := s.subject(k.Subject)
		ss.versions[k.Version] = &v
		if v.ID > s.maxID {
			s.maxID = v.ID
		}
	case KeyConfig:
		level := ""
		if r.Value != nil {
			var v ConfigValue
			if err := json.Unmarshal(r.Value, &v); err != nil {
				bad(err)
				return
			}
			level = strings.ToUpper(v.CompatibilityLevel)
		}
		if k.Subject == "" {
			s.config = level
		} else {
			s.subject(k.Subject).config = level
			s.dropIfEmpty(k.Subject)
		}
	case KeyMode:
		mode := ""
		if r.Value != nil {
			var v ModeValue
			if err := json.Unmarshal(r.Value, &v); err != nil {
				bad(err)
				return
			}
			mode = strings.ToUpper(v.Mode)
		}
		if k.Subject == "" {
			s.mode = mode
		} else {
			s.subject(k.Subject).mode = mode
			s.dropIfEmpty(k.Subject)
		}
	case KeyDeleteSubject:
		if r.Value == nil {
			return
		}
		var v DeleteSubjectValue
		if err := json.Unmarshal(r.Value, &v); err != nil {
			bad(err)
			return
		}
		if ss := s.subjects[k.Subject]; ss != nil {
			for ver, sv := range ss.versions {
				if ver <= v.Version && !sv.Deleted {
					c := *sv
					c.Deleted = true
					ss.versions[ver] = &c
				}
			}
		}
	case KeyClearSubject:
		if r.Value == nil {
			return
		}
		if ss := s.subjects[k.Subject]; ss != nil {
			for ver, sv := range ss.versions {
				if sv.Deleted {
					delete(ss.versions, ver)
				}
			}
			s.dropIfEmpty(k.Subject)
		}
	default: // NOOP, and Confluent's ASSOC, CONTEXT, ...: nothing to apply
	}
}

// Lock should be held.
func (s *state) subject(name string) *subjectState {
	ss := s.subjects[name]
	if ss == nil {
		ss = &subjectState{versions: map[int]*SchemaValue{}}
		s.subjects[name] = ss
	}
	return ss
}

// Lock should be held.
func (s *state) dropIfEmpty(name string) {
	if ss := s.subjects[name]; ss != nil && len(ss.versions) == 0 && ss.config == "" && ss.mode == "" {
		delete(s.subjects, name)
	}
}

// reached returns a channel closed once the view has applied offset off
// (nil when it already has).
func (s *state) reached(off int64) <-chan struct{} {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.next > off {
		return nil
	}
	return s.changed
}

// The read helpers below take the read lock themselves.

// versions returns a subject's version numbers in order, with or without
// the soft-deleted ones.
func (ss *subjectState) sortedVersions(deleted bool) []int {
	out := make([]int, 0, len(ss.versions))
	for v, sv := range ss.versions {
		if deleted || !sv.Deleted {
			out = append(out, v)
		}
	}
	sort.Ints(out)
	return out
}

func (s *state) subjectNames(prefix string, deleted, deletedOnly bool) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := []string{}
	for name, ss := range s.subjects {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		live := len(ss.sortedVersions(false)) > 0
		dead := len(ss.versions) > 0 && !live
		switch {
		case deletedOnly && dead, !deletedOnly && live, !deletedOnly && deleted && dead:
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// schemaByID returns the first (subject, version) holding id, soft-deleted
// ones last, or nil.
func (s *state) schemaByID(id int, subject string) *SchemaValue {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var best *SchemaValue
	better := func(a, b *SchemaValue) bool {
		if b == nil {
			return true
		}
		if a.Deleted != b.Deleted {
			return !a.Deleted
		}
		if a.Subject != b.Subject {
			return a.Subject < b.Subject
		}
		return a.Version < b.Version
	}
	for name, ss := range s.subjects {
		if subject != "" && name != subject {
			continue
		}
		for _, sv := range ss.versions {
			if sv.ID == id && better(sv, best) {
				best = sv
			}
		}
	}
	return best
}

// usesOf lists the (subject, version) pairs holding id.
func (s *state) usesOf(id int, deleted bool) []*SchemaValue {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []*SchemaValue
	for _, ss := range s.subjects {
		for _, sv := range ss.versions {
			if sv.ID == id && (deleted || !sv.Deleted) {
				out = append(out, sv)
			}
		}
	}
	slices.SortFunc(out, func(a, b *SchemaValue) int {
		if c := strings.Compare(a.Subject, b.Subject); c != 0 {
			return c
		}
		return a.Version - b.Version
	})
	return out
}

// version returns a subject's version v (-1 = the latest live one) with or
// without soft-deleted ones, and whether the subject exists at all.
func (s *state) version(subject string, v int, deleted bool) (sv *SchemaValue, subjectExists bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ss := s.subjects[subject]
	if ss == nil || len(ss.versions) == 0 {
		return nil, false
	}
	vs := ss.sortedVersions(deleted)
	if len(vs) == 0 {
		return nil, deleted
	}
	if v == -1 {
		return ss.versions[vs[len(vs)-1]], true
	}
	sv = ss.versions[v]
	if sv == nil || (sv.Deleted && !deleted) {
		return nil, true
	}
	return sv, true
}

// referencedBy lists the ids of live schemas referring to (subject, version).
func (s *state) referencedBy(subject string, version int, deleted bool) []int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	seen := map[int]bool{}
	for _, ss := range s.subjects {
		for _, sv := range ss.versions {
			if sv.Deleted && !deleted {
				continue
			}
			for _, r := range sv.References {
				if r.Subject == subject && r.Version == version {
					seen[sv.ID] = true
				}
			}
		}
	}
	out := make([]int, 0, len(seen))
	for id := range seen {
		out = append(out, id)
	}
	sort.Ints(out)
	return out
}

// resolve returns the references with their sources, recursively (bounded).
func (s *state) resolve(refs []schema.Reference, depth int) ([]schema.Resolved, error) {
	if depth > schema.MaxReferenceDeep {
		return nil, errInvalidSchema("references nest deeper than %d", schema.MaxReferenceDeep)
	}
	out := make([]schema.Resolved, 0, len(refs))
	for _, r := range refs {
		sv, _ := s.version(r.Subject, r.Version, true)
		if r.Version == -1 {
			sv, _ = s.version(r.Subject, -1, false)
		}
		if sv == nil {
			return nil, errInvalidSchema("reference %q: subject %q version %d not found", r.Name, r.Subject, r.Version)
		}
		sub, err := s.resolve(sv.References, depth+1)
		if err != nil {
			return nil, err
		}
		out = append(out, schema.Resolved{Reference: schema.Reference{Name: r.Name, Subject: r.Subject, Version: sv.Version},
			Source: schema.Source{Type: sv.Type(), Text: sv.Schema, References: sub}})
	}
	return out, nil
}

func (s *state) compatibility(subject string) string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if ss := s.subjects[subject]; ss != nil && ss.config != "" {
		return ss.config
	}
	if s.config != "" {
		return s.config
	}
	return "BACKWARD"
}

func (s *state) modeOf(subject string) string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if ss := s.subjects[subject]; ss != nil && ss.mode != "" {
		return ss.mode
	}
	if s.mode != "" {
		return s.mode
	}
	return "READWRITE"
}

// counts returns the number of live schema versions and distinct ids.
func (s *state) counts() (versions, ids int) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	seen := map[int]bool{}
	for _, ss := range s.subjects {
		for _, sv := range ss.versions {
			if !sv.Deleted {
				versions++
				seen[sv.ID] = true
			}
		}
	}
	return versions, len(seen)
}
