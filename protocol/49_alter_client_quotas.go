package protocol

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/security"
)

// AlterClientQuotas: v0-1
//
// Behaviour (KIP-546; ZkAdminManager.alterClientQuotas,
// ClientQuotaControlManager's checks):
//   - Sets or removes quota keys (producer_byte_rate, consumer_byte_rate,
//     request_percentage, controller_mutation_rate) of each entity: a user,
//     a client id, or a user and a client id, a null name meaning the
//     default entity of its type. Stored in Kafka's znodes
//     (/config/users/<user>[/clients/<client-id>], /config/clients/<client-id>)
//     with a change notification, or in the standalone store; other keys of
//     the same node (a user's SCRAM credentials) are kept. Every broker
//     enforces the new quotas once it has read the notification.
//     controller_mutation_rate limits the partitions a client creates and
//     deletes (KIP-599; CreateTopics, CreatePartitions, DeleteTopics).
//   - One result per entry, each on its own: an empty entity, a type
//     given twice, an unknown type, an empty name, an unknown key, a value
//     not greater than 0 or a fractional byte rate: INVALID_REQUEST with
//     Kafka's message. IP entities (connection_creation_rate) are refused
//     with INVALID_REQUEST: Sluice has no IP quotas. The name <default> is
//     reserved for the default entity (Kafka would store a user of that
//     name under a sanitized path): INVALID_REQUEST.
//   - validate_only checks without writing. The broker that wrote the
//     change enforces it before it answers.
//   - Needs AlterConfigs on the cluster (else CLUSTER_AUTHORIZATION_FAILED
//     on every entry). Any broker writes to the store.
//
// Version notes:
//   - v1: flexible.

func init() { register(49, 0, 1, handleAlterClientQuotas) }

// parseQuotaEntity reads a request's entity.
func parseQuotaEntity(parts []kmsg.AlterClientQuotasRequestEntryEntity) (cluster.QuotaEntity, error) {
	var e cluster.QuotaEntity
	if len(parts) == 0 {
		return e, fmt.Errorf("%w: Invalid empty client quota entity", cluster.ErrInvalidQuota)
	}
	seen := map[string]bool{}
	for _, p := range parts {
		if seen[p.Type] {
			return e, fmt.Errorf("%w: Invalid client quota entity, duplicate entity entry %s", cluster.ErrInvalidQuota, p.Type)
		}
		seen[p.Type] = true
		name := cluster.DefaultQuotaName
		if p.Name != nil {
			name = *p.Name
			if name == "" {
				return e, fmt.Errorf("%w: Empty %s not supported", cluster.ErrInvalidQuota, p.Type)
			}
			if name == cluster.DefaultQuotaName {
				return e, fmt.Errorf("%w: the name %s is reserved for the default %s (a null name)", cluster.ErrInvalidQuota, name, p.Type)
			}
		}
		switch p.Type {
		case quotaTypeUser:
			e.User = name
		case quotaTypeClientID:
			e.ClientID = name
		case quotaTypeIP:
			return e, fmt.Errorf("%w: IP quotas (connection_creation_rate) are not supported", cluster.ErrInvalidQuota)
		default:
			return e, fmt.Errorf("%w: Unhandled client quota entity type: %s", cluster.ErrInvalidQuota, p.Type)
		}
	}
	return e, nil
}

func handleAlterClientQuotas(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	allowed := s.allowedCluster(r, security.OpAlterConfigs)
	for _, entry := range req.Entries {
		re := kmsg.NewAlterClientQuotasResponseEntry()
		for _, p := range entry.Entity {
			x := kmsg.NewAlterClientQuotasResponseEntryEntity()
			x.Type, x.Name = p.Type, p.Name
			re.Entity = append(re.Entity, x)
		}
		err := alterClientQuotas(ctx, s, r, allowed, entry, req.ValidateOnly)
		if err != nil {
			var code int16
			switch {
			case errors.Is(err, errQuotaAuthorization):
				code = kerr.ClusterAuthorizationFailed.Code
			case errors.Is(err, cluster.ErrInvalidQuota):
				code = kerr.InvalidRequest.Code
			default:
				code = kerr.UnknownServerError.Code
			}
			msg := err.Error()
			re.ErrorCode, re.ErrorMessage = code, &msg
		}
		resp.Entries = append(resp.Entries, re)
	}
	return resp, nil
}

var errQuotaAuthorization = errors.New("altering client quotas needs AlterConfigs on the cluster")

func alterClientQuotas(ctx context.Context, s *Server, r *Request, allowed bool, entry kmsg.AlterClientQuotasRequestEntry, validateOnly bool) error {
	if !allowed {
		return errQuotaAuthorization
	}
	e, err := parseQuotaEntity(entry.Entity)
	if err != nil {
		return err
	}
	ops := make([]cluster.QuotaOp, len(entry.Ops))
	for i, op := range entry.Ops {
		ops[i] = cluster.QuotaOp{Key: op.Key, Value: op.Value, Remove: op.Remove}
	}
	if err := cluster.ValidateQuotaOps(e, ops); err != nil {
		return err
	}
	if validateOnly {
		return nil
	}
	if s.cfg.QuotaStore == nil {
		return errors.New("this broker has no client quota store")
	}
	r.Detach()
	if err := s.cfg.QuotaStore.AlterClientQuotas(ctx, e, ops); err != nil {
		return err
	}
	if s.cfg.Quotas != nil {
		// This broker enforces the change before it answers; the others
		// when they read the notification.
		if err := s.cfg.Quotas.Load(ctx, s.cfg.QuotaStore); err != nil {
			s.log.Warn("reading client quotas after a change", "err", err)
		}
	}
	return nil
}
