package cluster

import (
	"context"
	"maps"
	"sort"

	"github.com/sluice-io/sluice/security"
)

// The standalone coordinator's SCRAM credentials: the users' config maps
// (Kafka's text form, as in /config/users/<name>) in the metadata file.

// ScramCredential implements Credentials.
func (s *Standalone) ScramCredential(user, mechanism string) (security.ScramCredential, bool) {
	s.mu.Lock()
	text, ok := s.state.Users[user][mechanism]
	s.mu.Unlock()
	if !ok {
		return security.ScramCredential{}, false
	}
	c, err := security.ParseScramCredential(mechanism, text)
	return c, err == nil
}

// UserScramCredentials implements Credentials.
func (s *Standalone) UserScramCredentials(ctx context.Context, users []string) (map[string][]security.ScramCredential, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return nil, err
	}
	out := map[string][]security.ScramCredential{}
	if users == nil {
		for u := range s.state.Users {
			users = append(users, u)
		}
		sort.Strings(users)
	}
	for _, u := range users {
		if creds, _ := ParseScramConfig(s.state.Users[u]); len(creds) > 0 {
			out[u] = creds
		}
	}
	return out, nil
}

// AlterScramCredentials implements Credentials: every change in one write
// of the file.
func (s *Standalone) AlterScramCredentials(ctx context.Context, changes []ScramChange) []error {
	errs := make([]error, len(changes))
	err := s.mutate(0, func() error {
		if s.state.Users == nil {
			s.state.Users = map[string]map[string]string{}
		}
		users, byUser := GroupScramChanges(changes)
		for _, u := range users {
			idx := byUser[u]
			cfg := maps.Clone(s.state.Users[u])
			if cfg == nil {
				cfg = map[string]string{}
			}
			var chs []ScramChange
			for _, i := range idx {
				chs = append(chs, changes[i])
			}
			uerrs, applied := ApplyScramChanges(cfg, chs)
			for j, i := range idx {
				errs[i] = uerrs[j]
			}
			if !applied {
				continue
			}
			if len(cfg) == 0 {
				delete(s.state.Users, u)
			} else {
				s.state.Users[u] = cfg
			}
		}
		return nil
	})
	if err != nil {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
	}
	return errs
}
