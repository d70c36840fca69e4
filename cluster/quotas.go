package cluster

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/sluice-io/sluice/security"
)

// Client quotas (KIP-13, KIP-55), where Kafka keeps them in ZooKeeper mode:
//
//	/config/users/<user>                      a user's quotas (beside its SCRAM credentials)
//	/config/users/<user>/clients/<client-id>  a user's quotas for one client id
//	/config/clients/<client-id>               a client id's quotas
//
// each {"version":1,"config":{"producer_byte_rate":"1048576",...}}, where a
// name is Kafka's sanitized form of the user or client id and <default>
// names the default entity (/config/users/<default>,
// /config/users/<user>/clients/<default>, /config/clients/<default>, ...).
// A change is announced by /config/changes/config_change_<seq> with
// {"version":2,"entity_path":"users/<user>/clients/<client-id>"} (or
// "users/<user>", "clients/<client-id>"), as AdminZkClient.changeConfigs
// writes it, so kafka-configs.sh --zookeeper and Sluice share the nodes.
// The standalone coordinator keeps the same maps in its file. Enforcement
// is package quota's.

// Quota config keys (Kafka's QuotaConfig).
const (
	QuotaProducerByteRate       = "producer_byte_rate"
	QuotaConsumerByteRate       = "consumer_byte_rate"
	QuotaRequestPercentage      = "request_percentage"
	QuotaControllerMutationRate = "controller_mutation_rate"
)

// quotaKeyIsLong says which quota keys Kafka types LONG (whole numbers);
// the others are DOUBLE.
var quotaKeyIsLong = map[string]bool{
	QuotaProducerByteRate:       true,
	QuotaConsumerByteRate:       true,
	QuotaRequestPercentage:      false,
	QuotaControllerMutationRate: false,
}

// IsQuotaKey says whether key is a client quota key (Kafka's
// QuotaConfig.isClientOrUserQuotaConfig).
func IsQuotaKey(key string) bool {
	_, ok := quotaKeyIsLong[key]
	return ok
}

// QuotaKeys are the client quota keys, sorted.
func QuotaKeys() []string {
	keys := make([]string, 0, len(quotaKeyIsLong))
	for k := range quotaKeyIsLong {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// DefaultQuotaName names the default entity of its type, as Kafka's
// ConfigEntityName.Default ("<default>"); on the wire it is a null name.
const DefaultQuotaName = "<default>"

// QuotaEntity is a quota's entity: a user, a client id, or both. An empty
// name means the type is absent; DefaultQuotaName is the default of its
// type. Names are as clients send them (not sanitized).
type QuotaEntity struct {
	User, ClientID string
}

func (e QuotaEntity) String() string {
	var parts []string
	if e.User != "" {
		parts = append(parts, "user="+e.User)
	}
	if e.ClientID != "" {
		parts = append(parts, "client-id="+e.ClientID)
	}
	return strings.Join(parts, ",")
}

// Path is the entity's znode path below /config: users/<u>,
// users/<u>/clients/<c> or clients/<c>, names sanitized as Kafka's
// Sanitizer does (<default> left as it is). It is also the entity_path of
// the entity's change notifications.
func (e QuotaEntity) Path() string {
	switch {
	case e.User != "" && e.ClientID != "":
		return "users/" + sanitizeQuotaName(e.User) + "/clients/" + sanitizeQuotaName(e.ClientID)
	case e.User != "":
		return "users/" + sanitizeQuotaName(e.User)
	default:
		return "clients/" + sanitizeQuotaName(e.ClientID)
	}
}

func sanitizeQuotaName(n string) string {
	if n == DefaultQuotaName {
		return n
	}
	return security.SanitizeUser(n)
}

func desanitizeQuotaName(s string) (string, error) {
	if s == DefaultQuotaName {
		return s, nil
	}
	return security.DesanitizeUser(s)
}

// ParseQuotaPath is Path's inverse.
func ParseQuotaPath(p string) (QuotaEntity, error) {
	parts := strings.Split(p, "/")
	var e QuotaEntity
	var err error
	switch {
	case len(parts) == 2 && parts[0] == "users":
		e.User, err = desanitizeQuotaName(parts[1])
	case len(parts) == 4 && parts[0] == "users" && parts[2] == "clients":
		if e.User, err = desanitizeQuotaName(parts[1]); err == nil {
			e.ClientID, err = desanitizeQuotaName(parts[3])
		}
	case len(parts) == 2 && parts[0] == "clients":
		e.ClientID, err = desanitizeQuotaName(parts[1])
	default:
		return e, fmt.Errorf("cluster: %q is not a client quota entity path", p)
	}
	if err == nil && (parts[1] == "" || len(parts) == 4 && parts[3] == "") {
		err = fmt.Errorf("cluster: %q has an empty name", p)
	}
	return e, err
}

// QuotaOp is one change of AlterClientQuotas: set Key to Value, or remove
// it (Remove).
type QuotaOp struct {
	Key    string
	Value  float64
	Remove bool
}

// ErrInvalidQuota is a quota change Kafka refuses with INVALID_REQUEST.
var ErrInvalidQuota = errors.New("invalid client quota")

// ValidateQuotaEntity checks an entity as Kafka's AlterClientQuotas does:
// at least one of user and client id.
func ValidateQuotaEntity(e QuotaEntity) error {
	if e.User == "" && e.ClientID == "" {
		return fmt.Errorf("%w: Invalid empty client quota entity", ErrInvalidQuota)
	}
	return nil
}

// ValidateQuotaOps checks changes as Kafka does (ClientQuotaControlManager,
// ZkAdminManager.alterClientQuotas): a known key, a value greater than 0,
// a whole number for the LONG keys; controller_mutation_rate only for a
// user or client id alone.
func ValidateQuotaOps(e QuotaEntity, ops []QuotaOp) error {
	for _, op := range ops {
		long, ok := quotaKeyIsLong[op.Key]
		if !ok {
			return fmt.Errorf("%w: Invalid configuration key %s", ErrInvalidQuota, op.Key)
		}
		if op.Remove {
			continue
		}
		if op.Key == QuotaControllerMutationRate && e.User != "" && e.ClientID != "" {
			return fmt.Errorf("%w: Invalid configuration key %s", ErrInvalidQuota, op.Key)
		}
		if math.IsNaN(op.Value) || math.IsInf(op.Value, 0) || op.Value <= 0 {
			return fmt.Errorf("%w: Quota %s must be greater than 0", ErrInvalidQuota, op.Key)
		}
		if long && (op.Value != math.Trunc(op.Value) || op.Value > math.MaxInt64) {
			return fmt.Errorf("%w: %s cannot be a fractional value.", ErrInvalidQuota, op.Key)
		}
	}
	return nil
}

// ApplyQuotaOps applies validated changes to an entity's config map (other
// keys, such as a user's SCRAM credentials, kept) in Kafka's text form: a
// LONG key as an integer, a DOUBLE as Java's Double.toString would have it
// parsed back (any float text).
func ApplyQuotaOps(config map[string]string, ops []QuotaOp) {
	for _, op := range ops {
		if op.Remove {
			delete(config, op.Key)
			continue
		}
		if quotaKeyIsLong[op.Key] {
			config[op.Key] = strconv.FormatInt(int64(op.Value), 10)
		} else {
			config[op.Key] = strconv.FormatFloat(op.Value, 'f', -1, 64)
		}
	}
}

// QuotaValues reads the quota keys of a config map; other keys and values
// that do not parse are left out.
func QuotaValues(config map[string]string) map[string]float64 {
	var out map[string]float64
	for k, v := range config {
		if !IsQuotaKey(k) {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || math.IsNaN(f) {
			continue
		}
		if out == nil {
			out = map[string]float64{}
		}
		out[k] = f
	}
	return out
}

// ChangeClientQuotas: a client quota changed (ClientQuotaStore).
const ChangeClientQuotas Change = 1 << 18

// ClientQuotaStore keeps the client quotas. Every broker holds all of them
// in memory (a handful of entities per user or application); a change made
// through one broker is delivered to every broker's Watch as
// ChangeClientQuotas.
type ClientQuotaStore interface {
	// ClientQuotas returns every entity that has at least one quota key,
	// with its quotas.
	ClientQuotas(ctx context.Context) (map[QuotaEntity]map[string]float64, error)
	// AlterClientQuotas applies validated changes to one entity's config
	// (other keys of the same znode kept).
	AlterClientQuotas(ctx context.Context, e QuotaEntity, ops []QuotaOp) error
}
