package protocol

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/security"
)

// AlterUserScramCredentials: v0
//
// Behaviour (KIP-554; ZkAdminManager.alterUserScramCredentials):
//   - Deletes and upserts SCRAM credentials in the credential store
//     (ZooKeeper's /config/users/<name> with a /config/changes
//     notification, or the standalone store), each user's changes in one
//     write. The client salts the password (salted_password = Hi(password,
//     salt, iterations)); the broker derives and keeps the stored and server
//     keys, never the password. Every broker's cache follows the
//     notification, so the user logs in anywhere within seconds.
//   - One result per user; a user's changes apply together or not at all:
//     an empty name, iterations outside 4096..16384 or an empty salt or
//     salted password: UNACCEPTABLE_CREDENTIAL; a mechanism other than
//     SCRAM-SHA-256 (1) and SCRAM-SHA-512 (2): UNSUPPORTED_SASL_MECHANISM;
//     the same user and mechanism twice in the request: DUPLICATE_RESOURCE;
//     deleting a credential that does not exist: RESOURCE_NOT_FOUND.
//   - Any broker writes to the store (kadm sends it to the controller, as
//     Kafka requires).
//
// Version notes:
//   - v0: flexible.

func init() { register(51, 0, 0, handleAlterUserScramCredentials) }

func scramCode(mechanism string) int8 {
	if m, ok := security.ScramMechanismNamed(mechanism); ok {
		return m.Code
	}
	return 0
}

func handleAlterUserScramCredentials(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
	req := r.Msg.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)

	type userState struct {
		code    int16
		msg     string
		changes []cluster.ScramChange
	}
	var order []string
	users := map[string]*userState{}
	pairs := map[[2]string]int{}
	user := func(name string) *userState {
		u := users[name]
		if u == nil {
			u = &userState{}
			users[name] = u
			order = append(order, name)
		}
		return u
	}
	fail := func(u *userState, code int16, format string, args ...any) {
		if u.code == 0 {
			u.code, u.msg = code, fmt.Sprintf(format, args...)
		}
	}
	check := func(name string, code int8) (*userState, *security.ScramMechanism) {
		u := user(name)
		m, ok := security.ScramMechanismCoded(code)
		switch {
		case name == "":
			fail(u, kerr.UnacceptableCredential.Code, "username must not be empty")
		case !ok:
			fail(u, kerr.UnsupportedSaslMechanism.Code, "unknown SCRAM mechanism code %d (1: SCRAM-SHA-256, 2: SCRAM-SHA-512)", code)
		default:
			k := [2]string{name, m.Name}
			if pairs[k]++; pairs[k] > 1 {
				fail(u, kerr.DuplicateResource.Code, "a user credential cannot be altered twice in one request (%s)", m.Name)
			}
		}
		return u, m
	}
	if !s.allowedCluster(r, security.OpAlter) {
		// Kafka answers every user of the request with the refusal.
		for _, d := range req.Deletions {
			fail(user(d.Name), kerr.ClusterAuthorizationFailed.Code, "altering SCRAM credentials needs Alter on the cluster")
		}
		for _, up := range req.Upsertions {
			fail(user(up.Name), kerr.ClusterAuthorizationFailed.Code, "altering SCRAM credentials needs Alter on the cluster")
		}
		for _, name := range order {
			u := users[name]
			res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			res.User, res.ErrorCode = name, u.code
			msg := u.msg
			res.ErrorMessage = &msg
			resp.Results = append(resp.Results, res)
		}
		return resp, nil
	}
	for _, d := range req.Deletions {
		if u, m := check(d.Name, d.Mechanism); m != nil {
			u.changes = append(u.changes, cluster.ScramChange{User: d.Name, Mechanism: m.Name})
		}
	}
	for _, up := range req.Upsertions {
		u, m := check(up.Name, up.Mechanism)
		if m == nil {
			continue
		}
		if err := security.CheckScramIterations(int(up.Iterations)); err != nil {
			fail(u, kerr.UnacceptableCredential.Code, "%s: %v", m.Name, err)
			continue
		}
		if len(up.Salt) == 0 || len(up.SaltedPassword) == 0 {
			fail(u, kerr.UnacceptableCredential.Code, "%s: empty salt or salted password", m.Name)
			continue
		}
		cred := m.CredentialFromSalted(up.SaltedPassword, up.Salt, int(up.Iterations))
		u.changes = append(u.changes, cluster.ScramChange{User: up.Name, Mechanism: m.Name, Credential: &cred})
	}

	// A deletion of a credential that does not exist fails its user's
	// changes before anything is written.
	store := s.cfg.Credentials
	var deleting []string
	for _, name := range order {
		if u := users[name]; u.code == 0 && slices.ContainsFunc(u.changes, func(c cluster.ScramChange) bool { return c.Credential == nil }) {
			deleting = append(deleting, name)
		}
	}
	if len(deleting) > 0 && store != nil {
		r.Detach()
		have, err := store.UserScramCredentials(ctx, deleting)
		for _, name := range deleting {
			u := users[name]
			if err != nil {
				fail(u, kerr.UnknownServerError.Code, "%v", err)
				continue
			}
			for _, ch := range u.changes {
				if ch.Credential == nil && !slices.ContainsFunc(have[name], func(c security.ScramCredential) bool { return c.Mechanism == ch.Mechanism }) {
					fail(u, kerr.ResourceNotFound.Code, "attempt to delete a user credential that does not exist (%s)", ch.Mechanism)
				}
			}
		}
	}

	var changes []cluster.ScramChange
	var owner []string
	for _, name := range order {
		if u := users[name]; u.code == 0 {
			changes = append(changes, u.changes...)
			for range u.changes {
				owner = append(owner, name)
			}
		}
	}
	if len(changes) > 0 {
		if store == nil {
			for _, name := range order {
				fail(users[name], kerr.UnknownServerError.Code, "this broker has no credential store")
			}
		} else {
			r.Detach()
			for i, err := range store.AlterScramCredentials(ctx, changes) {
				if err == nil {
					continue
				}
				code := kerr.UnknownServerError.Code
				if errors.Is(err, cluster.ErrNoCredential) {
					code = kerr.ResourceNotFound.Code
				}
				fail(users[owner[i]], code, "%v", err)
			}
		}
	}
	for _, name := range order {
		u := users[name]
		res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		res.User = name
		if u.code != 0 {
			msg := u.msg
			res.ErrorCode, res.ErrorMessage = u.code, &msg
		}
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}
