package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/sluice-io/sluice/security"
)

// ACLStore is where the cluster's ACLs are kept, as Kafka's AclAuthorizer
// keeps them: per resource pattern, one record of entries
// (/kafka-acl/<Type>/<name> for literal patterns,
// /kafka-acl-extended/prefixed/<Type>/<name> for prefixed ones, with a
// change notification per write under /kafka-acl-changes and
// /kafka-acl-extended-changes; the standalone file on a single node). It
// is the security.Source of every broker's authorizer.
type ACLStore interface {
	// ACLs returns every binding, from the store's cache (writes by other
	// brokers arrive through watches).
	ACLs(ctx context.Context) ([]security.ACL, error)
	// UpdateACLs replaces the entries of resource r with update(current),
	// as one compare-and-set (retried when another writer came between the
	// read and the write); no entries left removes r's record. It reports
	// whether the entries changed. update may run more than once.
	UpdateACLs(ctx context.Context, r security.Resource, update func(current []security.Entry) []security.Entry) (bool, error)
	// WatchACLs signals (coalesced) when the ACLs may have changed, until
	// ctx ends; then it is closed.
	WatchACLs(ctx context.Context) <-chan struct{}
}

// ErrACLUpdate marks an ACL write that lost its compare-and-set too many
// times in a row.
var ErrACLUpdate = errors.New("cluster: ACL update kept conflicting with other writers")

// maxACLUpdateRetries is how often UpdateACLs re-reads and retries a write
// another writer beat (Kafka's AclAuthorizer: 10, after a short backoff).
const maxACLUpdateRetries = 10

// CreateACLs adds the bindings (CreateAcls): each is validated
// (security.ACL.Validate) and added to its resource's entries unless
// already there. The result holds each binding's error, nil on success;
// bindings of one resource are written together.
func CreateACLs(ctx context.Context, s ACLStore, acls []security.ACL) []error {
	errs := make([]error, len(acls))
	byResource := map[security.Resource][]int{}
	var order []security.Resource
	for i, a := range acls {
		if err := a.Validate(); err != nil {
			errs[i] = err
			continue
		}
		if _, ok := byResource[a.Resource]; !ok {
			order = append(order, a.Resource)
		}
		byResource[a.Resource] = append(byResource[a.Resource], i)
	}
	for _, r := range order {
		idx := byResource[r]
		_, err := s.UpdateACLs(ctx, r, func(current []security.Entry) []security.Entry {
			out := slices.Clone(current)
			for _, i := range idx {
				if !slices.Contains(out, acls[i].Entry) {
					out = append(out, acls[i].Entry)
				}
			}
			return out
		})
		if err != nil {
			for _, i := range idx {
				errs[i] = err
			}
		}
	}
	return errs
}

// DeletedACL is one binding DeleteACLs removed, with the error of its
// resource's write (nil when it was removed).
type DeletedACL struct {
	ACL security.ACL
	Err error
}

// DeleteACLs removes the bindings the filters select (DeleteAcls, as
// AclAuthorizer.deleteAcls): each resource pattern the store holds that
// some filter's resource part matches is rewritten without the entries a
// matching filter's entry part selects. Each removed binding is reported
// under the first filter that selected it. Invalid filters are refused
// whole (their error in filterErrs) and match nothing.
func DeleteACLs(ctx context.Context, s ACLStore, filters []security.Filter) (deleted [][]DeletedACL, filterErrs []error, err error) {
	deleted = make([][]DeletedACL, len(filters))
	filterErrs = make([]error, len(filters))
	valid := make([]bool, len(filters))
	for i, f := range filters {
		if filterErrs[i] = f.Validate(); filterErrs[i] == nil {
			valid[i] = true
		}
	}
	all, err := s.ACLs(ctx)
	if err != nil {
		return nil, nil, err
	}
	var resources []security.Resource
	for _, a := range all {
		if !slices.Contains(resources, a.Resource) {
			resources = append(resources, a.Resource)
		}
	}
	for _, r := range resources {
		var matching []int
		for i, f := range filters {
			if valid[i] && f.Resource.Matches(r) {
				matching = append(matching, i)
			}
		}
		if len(matching) == 0 {
			continue
		}
		var removed []DeletedACL
		var by []int
		_, err := s.UpdateACLs(ctx, r, func(current []security.Entry) []security.Entry {
			removed, by = removed[:0], by[:0]
			out := make([]security.Entry, 0, len(current))
			for _, e := range current {
				first := -1
				for _, i := range matching {
					if filters[i].Entry.Matches(e) {
						first = i
						break
					}
				}
				if first < 0 {
					out = append(out, e)
					continue
				}
				removed = append(removed, DeletedACL{ACL: security.ACL{Resource: r, Entry: e}})
				by = append(by, first)
			}
			return out
		})
		for j, d := range removed {
			d.Err = err
			deleted[by[j]] = append(deleted[by[j]], d)
		}
	}
	return deleted, filterErrs, nil
}

// UpdateEntries is the compare-and-set loop of UpdateACLs for a store
// that reads a resource's entries with a version and writes them back
// only when the version is unchanged (ErrBadVersion otherwise).
func UpdateEntries(ctx context.Context, r security.Resource, update func([]security.Entry) []security.Entry,
	read func() (entries []security.Entry, version int32, exists bool, err error),
	write func(entries []security.Entry, version int32, exists bool) error) (bool, error) {
	for range maxACLUpdateRetries {
		cur, version, exists, err := read()
		if err != nil {
			return false, err
		}
		next := dedupEntries(update(slices.Clone(cur)))
		if sameEntries(cur, next) {
			return false, nil
		}
		err = write(next, version, exists)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, ErrBadVersion) {
			return false, err
		}
		if err := ctx.Err(); err != nil {
			return false, err
		}
	}
	return false, fmt.Errorf("%w: %s", ErrACLUpdate, r)
}

func dedupEntries(es []security.Entry) []security.Entry {
	out := es[:0]
	for _, e := range es {
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out
}

// sameEntries compares two entry sets, order aside.
func sameEntries(a, b []security.Entry) bool {
	if len(a) != len(b) {
		return false
	}
	for _, e := range a {
		if !slices.Contains(b, e) {
			return false
		}
	}
	return true
}
