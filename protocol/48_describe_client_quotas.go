package protocol

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/security"
)

// DescribeClientQuotas: v0-1
//
// Behaviour (KIP-546; ZkAdminManager.describeClientQuotas):
//   - Answers the client quotas (cluster.ClientQuotaStore, every broker's
//     in-memory copy) of the entities the filter matches: per component
//     (user, client-id) match_type 0 an exact name, 1 the default entity,
//     2 any entity of that type; a type without a component matches
//     anything unless strict, then only entities without that type. Only
//     entities with at least one quota key are listed, with every quota
//     key they hold (keys other than quotas, such as a user's SCRAM
//     credentials, never).
//   - Needs DescribeConfigs on the cluster (else CLUSTER_AUTHORIZATION_FAILED).
//   - A component type given twice, an empty type, a match_type 0 without
//     a name or 1/2 with one, an ip component beside user or client-id:
//     INVALID_REQUEST; an unknown type: UNSUPPORTED_VERSION (Kafka's
//     "Custom entity type ... not supported"). An ip component alone
//     matches nothing: Sluice has no IP quotas.
//
// Version notes:
//   - v1: flexible.

func init() { register(48, 0, 1, handleDescribeClientQuotas) }

const (
	quotaTypeUser     = "user"
	quotaTypeClientID = "client-id"
	quotaTypeIP       = "ip"
)

// quotaFilter is one type's component: exact name, default, or any.
type quotaFilter struct {
	present bool
	kind    int8 // 0 exact, 1 default, 2 any
	name    string
}

// matches says whether an entity's name of the component's type (""
// absent, cluster.DefaultQuotaName the default) passes.
func (f quotaFilter) matches(name string, strict bool) bool {
	if !f.present {
		return name == "" || !strict
	}
	switch f.kind {
	case 0:
		return name != "" && name != cluster.DefaultQuotaName && name == f.name
	case 1:
		return name == cluster.DefaultQuotaName
	}
	return name != ""
}

var errInvalidQuotaRequest = errors.New("invalid request")

func parseQuotaFilter(req *kmsg.DescribeClientQuotasRequest) (user, client quotaFilter, ipOnly bool, err error) {
	var ip bool
	for _, c := range req.Components {
		var f *quotaFilter
		switch c.EntityType {
		case quotaTypeUser:
			f = &user
		case quotaTypeClientID:
			f = &client
		case quotaTypeIP:
			if ip {
				return user, client, false, fmt.Errorf("%w: Duplicate ip filter component entity type", errInvalidQuotaRequest)
			}
			ip = true
			continue
		case "":
			return user, client, false, fmt.Errorf("%w: Unexpected empty filter component entity type", errInvalidQuotaRequest)
		default:
			return user, client, false, fmt.Errorf("Custom entity type '%s' not supported", c.EntityType)
		}
		if f.present {
			return user, client, false, fmt.Errorf("%w: Duplicate %s filter component entity type", errInvalidQuotaRequest, c.EntityType)
		}
		switch c.MatchType {
		case 0:
			if c.Match == nil {
				return user, client, false, fmt.Errorf("%w: Match type 'exact' requires a non-null match", errInvalidQuotaRequest)
			}
			*f = quotaFilter{present: true, kind: 0, name: *c.Match}
		case 1, 2:
			if c.Match != nil {
				return user, client, false, fmt.Errorf("%w: Match type %d requires a null match", errInvalidQuotaRequest, c.MatchType)
			}
			*f = quotaFilter{present: true, kind: int8(c.MatchType)}
		default:
			return user, client, false, fmt.Errorf("%w: Unexpected match type: %d", errInvalidQuotaRequest, c.MatchType)
		}
	}
	if ip && (user.present || client.present) {
		return user, client, false, fmt.Errorf("%w: Invalid entity filter component combination, IP filter component should not be used with user or clientId filter component.", errInvalidQuotaRequest)
	}
	return user, client, ip, nil
}

func handleDescribeClientQuotas(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	fail := func(code int16, msg string) (kmsg.Response, error) {
		resp.ErrorCode, resp.ErrorMessage = code, &msg
		return resp, nil
	}
	if !s.allowedCluster(r, security.OpDescribeConfigs) {
		return fail(kerr.ClusterAuthorizationFailed.Code, "describing client quotas needs DescribeConfigs on the cluster")
	}
	user, client, ipOnly, err := parseQuotaFilter(req)
	if err != nil {
		code := kerr.UnsupportedVersion.Code
		if errors.Is(err, errInvalidQuotaRequest) {
			code = kerr.InvalidRequest.Code
		}
		return fail(code, err.Error())
	}
	if s.cfg.QuotaStore == nil {
		return fail(kerr.UnknownServerError.Code, "this broker has no client quota store")
	}
	if ipOnly {
		return resp, nil // no IP quotas
	}
	all, err := s.cfg.QuotaStore.ClientQuotas(ctx)
	if err != nil {
		return fail(kerr.UnknownServerError.Code, err.Error())
	}
	var entities []cluster.QuotaEntity
	for e := range all {
		if user.matches(e.User, req.Strict) && client.matches(e.ClientID, req.Strict) {
			entities = append(entities, e)
		}
	}
	sort.Slice(entities, func(i, j int) bool {
		a, b := entities[i], entities[j]
		if a.User != b.User {
			return a.User < b.User
		}
		return a.ClientID < b.ClientID
	})
	for _, e := range entities {
		re := kmsg.NewDescribeClientQuotasResponseEntry()
		re.Entity = quotaEntityWire(e, func(typ string, name *string) kmsg.DescribeClientQuotasResponseEntryEntity {
			x := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			x.Type, x.Name = typ, name
			return x
		})
		q := all[e]
		keys := make([]string, 0, len(q))
		for k := range q {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v := kmsg.NewDescribeClientQuotasResponseEntryValue()
			v.Key, v.Value = k, q[k]
			re.Values = append(re.Values, v)
		}
		resp.Entries = append(resp.Entries, re)
	}
	return resp, nil
}

// quotaEntityWire is an entity as the wire has it: a user and/or client-id
// component, the default as a null name.
func quotaEntityWire[T any](e cluster.QuotaEntity, mk func(typ string, name *string) T) []T {
	var out []T
	add := func(typ, name string) {
		if name == "" {
			return
		}
		var p *string
		if name != cluster.DefaultQuotaName {
			p = &name
		}
		out = append(out, mk(typ, p))
	}
	add(quotaTypeUser, e.User)
	add(quotaTypeClientID, e.ClientID)
	return out
}
