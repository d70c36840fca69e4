package cluster

import (
	"context"
	"maps"
)

// The standalone coordinator's client quotas (quotas.go): a user's quotas
// share its config map with its SCRAM credentials (Users, as
// /config/users/<user> does); the client id and user+client id entities
// are kept by their entity path (ClientConfigs).

var _ ClientQuotaStore = (*Standalone)(nil)

// ClientQuotas implements ClientQuotaStore.
func (s *Standalone) ClientQuotas(ctx context.Context) (map[QuotaEntity]map[string]float64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return nil, err
	}
	out := map[QuotaEntity]map[string]float64{}
	for u, cfg := range s.state.Users {
		if q := QuotaValues(cfg); q != nil {
			out[QuotaEntity{User: u}] = q
		}
	}
	for p, cfg := range s.state.ClientConfigs {
		e, err := ParseQuotaPath(p)
		if err != nil {
			continue
		}
		if q := QuotaValues(cfg); q != nil {
			out[e] = q
		}
	}
	return out, nil
}

// AlterClientQuotas implements ClientQuotaStore: one write of the file.
func (s *Standalone) AlterClientQuotas(ctx context.Context, e QuotaEntity, ops []QuotaOp) error {
	if err := ValidateQuotaEntity(e); err != nil {
		return err
	}
	if err := ValidateQuotaOps(e, ops); err != nil {
		return err
	}
	return s.mutate(ChangeClientQuotas, func() error {
		m := &s.state.ClientConfigs
		key := e.Path()
		if e.ClientID == "" {
			m, key = &s.state.Users, e.User
		}
		cfg := maps.Clone((*m)[key])
		if cfg == nil {
			cfg = map[string]string{}
		}
		ApplyQuotaOps(cfg, ops)
		if len(cfg) == 0 {
			delete(*m, key)
			return nil
		}
		if *m == nil {
			*m = map[string]map[string]string{}
		}
		(*m)[key] = cfg
		return nil
	})
}
