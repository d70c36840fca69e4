package protocol

import (
	"context"
	"github.com/sluice-io/sluice/security"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeUserScramCredentials: v0
//
// Behaviour (KIP-554; ZkAdminManager.describeUserScramCredentials):
//   - Lists the SCRAM credentials of the named users (null: of every user
//     that has one, by name) from the credential store: each mechanism and
//     its iteration count, never the salt or keys.
//   - A named user without any credential: RESOURCE_NOT_FOUND; a name
//     given twice: DUPLICATE_RESOURCE (each, in the user's result). Any
//     broker answers from the store.
//   - The store not readable: UNKNOWN_SERVER_ERROR at the top level.
//
// Version notes:
//   - v0: flexible.

func init() { register(50, 0, 0, handleDescribeUserScramCredentials) }

func handleDescribeUserScramCredentials(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if !s.allowedCluster(r, security.OpDescribe) {
		msg := "describing SCRAM credentials needs Describe on the cluster"
		resp.ErrorCode, resp.ErrorMessage = kerr.ClusterAuthorizationFailed.Code, &msg
		return resp, nil
	}
	store := s.cfg.Credentials
	if store == nil {
		msg := "this broker has no credential store"
		resp.ErrorCode, resp.ErrorMessage = kerr.UnknownServerError.Code, &msg
		return resp, nil
	}
	var names []string
	seen := map[string]int{}
	if req.Users != nil {
		for _, u := range req.Users {
			if seen[u.Name]++; seen[u.Name] == 1 {
				names = append(names, u.Name)
			}
		}
		if len(names) == 0 {
			return resp, nil
		}
	}
	var lookup []string
	for _, n := range names {
		if seen[n] == 1 {
			lookup = append(lookup, n)
		}
	}
	creds := map[string][]scramInfo{}
	if req.Users == nil || len(lookup) > 0 {
		r.Detach()
		got, err := store.UserScramCredentials(ctx, lookup)
		if err != nil {
			msg := err.Error()
			resp.ErrorCode, resp.ErrorMessage = kerr.UnknownServerError.Code, &msg
			return resp, nil
		}
		for user, cs := range got {
			for _, c := range cs {
				creds[user] = append(creds[user], scramInfo{c.Mechanism, c.Iterations})
			}
		}
	}
	if req.Users == nil {
		for user := range creds {
			names = append(names, user)
		}
		sort.Strings(names)
	}
	for _, n := range names {
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User = n
		switch {
		case seen[n] > 1:
			msg := "cannot describe a user more than once in one request"
			res.ErrorCode, res.ErrorMessage = kerr.DuplicateResource.Code, &msg
		case len(creds[n]) == 0:
			msg := "attempt to describe a user credential that does not exist"
			res.ErrorCode, res.ErrorMessage = kerr.ResourceNotFound.Code, &msg
		default:
			for _, c := range creds[n] {
				info := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
				info.Mechanism, info.Iterations = scramCode(c.mechanism), int32(c.iterations)
				res.CredentialInfos = append(res.CredentialInfos, info)
			}
		}
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}

type scramInfo struct {
	mechanism  string
	iterations int
}
