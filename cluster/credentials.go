package cluster

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/sluice-io/sluice/security"
)

// SCRAM credentials, where Kafka keeps them: ZooKeeper's
// /config/users/<sanitized name> holds {"version":1,"config":{"SCRAM-SHA-512":
// "salt=...,stored_key=...,server_key=...,iterations=8192", ...}} (quota
// keys share the map), and a /config/changes/config_change_<seq> entry
// {"version":2,"entity_path":"users/<sanitized name>"} tells every broker
// to read it again; the standalone coordinator keeps the same text in its
// file. Brokers authenticate from memory: a change made on one broker takes
// effect on the others as soon as they have read the notification.

// ErrNoCredential is a deletion of a credential that does not exist, or a
// description of a user without any (Kafka's RESOURCE_NOT_FOUND).
var ErrNoCredential = errors.New("cluster: no such SCRAM credential")

// ScramChange is one change of AlterScramCredentials: an upsertion of a
// user's credential for a mechanism, or (Credential nil) its deletion.
type ScramChange struct {
	User       string
	Mechanism  string // "SCRAM-SHA-256", "SCRAM-SHA-512"
	Credential *security.ScramCredential
}

// Credentials is the SCRAM credential store of a Coordinator.
type Credentials interface {
	// ScramCredential answers an authentication from memory (the
	// coordinator's cache): the user's credential for a mechanism.
	ScramCredential(user, mechanism string) (security.ScramCredential, bool)
	// UserScramCredentials returns the credentials of users (nil: of
	// every user that has one), by user, sorted by mechanism.
	UserScramCredentials(ctx context.Context, users []string) (map[string][]security.ScramCredential, error)
	// AlterScramCredentials applies changes, each user's together (one
	// write and one notification per user), and returns each change's
	// error (ErrNoCredential for a deletion of a missing credential).
	AlterScramCredentials(ctx context.Context, changes []ScramChange) []error
}

// ApplyScramChanges applies a user's changes to the config map of its
// znode (mechanism -> credential text; other keys kept), returning each
// change's error. The caller writes the map back when any change applied.
func ApplyScramChanges(config map[string]string, changes []ScramChange) (errs []error, applied bool) {
	errs = make([]error, len(changes))
	for i, ch := range changes {
		if _, ok := security.ScramMechanismNamed(ch.Mechanism); !ok {
			errs[i] = fmt.Errorf("unknown SCRAM mechanism %q", ch.Mechanism)
			continue
		}
		if ch.Credential == nil {
			if _, ok := config[ch.Mechanism]; !ok {
				errs[i] = fmt.Errorf("%w: %s has no %s credential", ErrNoCredential, ch.User, ch.Mechanism)
				continue
			}
			delete(config, ch.Mechanism)
		} else {
			config[ch.Mechanism] = ch.Credential.String()
		}
		applied = true
	}
	return errs, applied
}

// ParseScramConfig reads the SCRAM credentials of a user's config map,
// sorted by mechanism name; entries that do not parse are returned as errs
// (keyed by mechanism) and left out.
func ParseScramConfig(config map[string]string) (creds []security.ScramCredential, errs map[string]error) {
	for _, m := range security.ScramMechanisms {
		text, ok := config[m.Name]
		if !ok {
			continue
		}
		c, err := security.ParseScramCredential(m.Name, text)
		if err != nil {
			if errs == nil {
				errs = map[string]error{}
			}
			errs[m.Name] = err
			continue
		}
		creds = append(creds, c)
	}
	sort.Slice(creds, func(i, j int) bool { return creds[i].Mechanism < creds[j].Mechanism })
	return creds, errs
}

// GroupScramChanges groups changes by user, keeping each user's changes in
// order and remembering each change's index.
func GroupScramChanges(changes []ScramChange) (users []string, byUser map[string][]int) {
	byUser = map[string][]int{}
	for i, ch := range changes {
		if _, ok := byUser[ch.User]; !ok {
			users = append(users, ch.User)
		}
		byUser[ch.User] = append(byUser[ch.User], i)
	}
	return users, byUser
}
