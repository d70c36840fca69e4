package schemareg

import (
	"context"
	"fmt"

	"github.com/sluice-io/sluice/schemareg/serde"
)

// The registry is a serde.Source for decoders in the same process (the
// console, the comparisons): schemas come from the in-memory view, without
// HTTP.
var _ serde.Source = (*Registry)(nil)

// SchemaByID implements serde.Source; the subject and version reported are
// the first live (else soft-deleted) use of the id, by subject name.
func (r *Registry) SchemaByID(_ context.Context, id int) (*serde.Registered, error) {
	sv := r.state.schemaByID(id, "")
	if sv == nil {
		return nil, fmt.Errorf("%w: id %d", serde.ErrNotFound, id)
	}
	return r.registered(sv)
}

// SchemaBySubject implements serde.Source (version -1 = latest).
func (r *Registry) SchemaBySubject(_ context.Context, subject string, version int) (*serde.Registered, error) {
	sv, _ := r.state.version(subject, version, false)
	if sv == nil {
		return nil, fmt.Errorf("%w: subject %s version %d", serde.ErrNotFound, subject, version)
	}
	return r.registered(sv)
}

func (r *Registry) registered(sv *SchemaValue) (*serde.Registered, error) {
	s, err := r.parse(sv.Type(), sv.Schema, sv.References)
	if err != nil {
		return nil, err
	}
	return &serde.Registered{ID: sv.ID, Subject: sv.Subject, Version: sv.Version, Schema: s}, nil
}

// SubjectInfo summarises a subject for listings (the console's subjects
// page).
type SubjectInfo struct {
	Subject       string
	Type          string // AVRO, PROTOBUF or JSON (of the latest version)
	LatestVersion int
	LatestID      int
	Versions      []int
	Compatibility string // the level in force (the subject's own or the global one)
}

// Subjects lists the live subjects with their latest version.
func (r *Registry) Subjects() []SubjectInfo {
	var out []SubjectInfo
	for _, s := range r.state.subjectNames("", false, false) {
		sv, _ := r.state.version(s, -1, false)
		if sv == nil {
			continue
		}
		r.state.mu.RLock()
		var vs []int
		if ss := r.state.subjects[s]; ss != nil {
			vs = ss.sortedVersions(false)
		}
		r.state.mu.RUnlock()
		out = append(out, SubjectInfo{Subject: s, Type: string(sv.Type()), LatestVersion: sv.Version, LatestID: sv.ID,
			Versions: vs, Compatibility: r.state.compatibility(s)})
	}
	return out
}

// Version returns version v (-1 latest) of subject, soft-deleted ones only
// when deleted is set, or nil.
func (r *Registry) Version(subject string, v int, deleted bool) *SchemaValue {
	sv, _ := r.state.version(subject, v, deleted)
	if sv == nil {
		return nil
	}
	c := *sv
	return &c
}

// SubjectVersions returns every version of subject, soft-deleted ones
// included (Deleted set), oldest first; nil when the subject is unknown.
func (r *Registry) SubjectVersions(subject string) []SchemaValue {
	r.state.mu.RLock()
	defer r.state.mu.RUnlock()
	ss := r.state.subjects[subject]
	if ss == nil {
		return nil
	}
	var out []SchemaValue
	for _, v := range ss.sortedVersions(true) {
		out = append(out, *ss.versions[v])
	}
	return out
}

// Compatibility is the compatibility level in force for subject (its own,
// else the global one); "" gives the global level.
func (r *Registry) Compatibility(subject string) string {
	if subject == "" {
		subject = "\x00"
	}
	return r.state.compatibility(subject)
}

// Writer reports whether this registry takes writes itself (it is the
// leader, or the only registry), and otherwise the leader's URL ("" when
// unknown): deletes from the console go through the writer.
func (r *Registry) Writer() (self bool, leaderURL string) {
	if r.isLeader() {
		return true, ""
	}
	return false, r.cfg.Leader.LeaderURL()
}
