package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/sluice-io/sluice/security"
)

// The standalone store keeps the ACLs as ZooKeeper would: one record per
// resource pattern, keyed by its node path (/kafka-acl/Topic/orders), in
// Kafka's node format, in the metadata file.

// ChangeACLs is the kind of change Watch delivers when the ACLs changed
// (WatchACLs turns it into its own signal). It is not part of ChangeAll:
// what reloads on every change need not reload for an ACL.
const ChangeACLs Change = 1 << 16

// ACLs implements ACLStore.
func (s *Standalone) ACLs(ctx context.Context) ([]security.ACL, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return nil, err
	}
	var out []security.ACL
	for path, raw := range s.state.ACLs {
		r, err := security.ParseACLPath(path)
		if err != nil {
			return nil, fmt.Errorf("standalone coordinator: %w", err)
		}
		entries, err := security.DecodeEntries(raw)
		if err != nil {
			return nil, fmt.Errorf("standalone coordinator: %s: %w", path, err)
		}
		for _, e := range entries {
			out = append(out, security.ACL{Resource: r, Entry: e})
		}
	}
	security.SortACLs(out)
	return out, nil
}

// UpdateACLs implements ACLStore.
func (s *Standalone) UpdateACLs(ctx context.Context, r security.Resource, update func([]security.Entry) []security.Entry) (bool, error) {
	if err := (security.ACL{Resource: r, Entry: security.Entry{Principal: "User:x", Host: "*", Operation: security.OpRead, Permission: security.Allow}}).Validate(); err != nil {
		return false, err
	}
	path := security.ACLPath(r)
	err := s.mutate(ChangeACLs, func() error {
		var cur []security.Entry
		if raw, ok := s.state.ACLs[path]; ok {
			var err error
			if cur, err = security.DecodeEntries(raw); err != nil {
				return fmt.Errorf("standalone coordinator: %s: %w", path, err)
			}
		}
		next := dedupEntries(update(slices.Clone(cur)))
		if sameEntries(cur, next) {
			return errUnchanged
		}
		if len(next) == 0 {
			delete(s.state.ACLs, path)
			return nil
		}
		if s.state.ACLs == nil {
			s.state.ACLs = map[string]json.RawMessage{}
		}
		s.state.ACLs[path] = security.EncodeEntries(next)
		return nil
	})
	if err == errUnchanged {
		return false, nil
	}
	return err == nil, err
}

// errUnchanged ends a mutate that has nothing to write.
var errUnchanged = errors.New("unchanged")

// WatchACLs implements ACLStore.
func (s *Standalone) WatchACLs(ctx context.Context) <-chan struct{} {
	return aclSignals(s.Watch(ctx))
}

// aclSignals turns the ChangeACLs of a Watch channel into a signal channel,
// closed when changes is.
func aclSignals(changes <-chan Change) <-chan struct{} {
	out := make(chan struct{}, 1)
	go func() {
		defer close(out)
		for ch := range changes {
			if ch&ChangeACLs == 0 {
				continue
			}
			select {
			case out <- struct{}{}:
			default: // one pending signal is enough
			}
		}
	}()
	return out
}
