package main

// sluice quotas: client quotas (producer_byte_rate, consumer_byte_rate,
// request_percentage, controller_mutation_rate) of users and client ids,
// through AlterClientQuotas and DescribeClientQuotas (what
// kafka-configs.sh --entity-type users/clients --alter --add-config does).

import (
	"context"
	"flag"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluice-io/sluice/cluster"
)

func init() {
	registerVerbs("quotas", "set, list and delete client quotas of users and client ids", quotasActions)
}

var quotasActions = []*cliAction{
	{"set", "", "set quotas of a user, a client id or both (--user, --client-id, --default)", quotasSet},
	{"list", "", "list quotas, all or those of --user/--client-id/--default", quotasList},
	{"delete", "", "delete quotas of an entity (all, or --key)", quotasDelete},
}

// quotaEntityFlags are the flags naming a quota entity.
type quotaEntityFlags struct {
	user, clientID, def string
}

func (q *quotaEntityFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&q.user, "user", "", "the user (principal name) the quota is for")
	fs.StringVar(&q.clientID, "client-id", "", "the client id the quota is for")
	fs.StringVar(&q.def, "default", "", "the default entity of a type: user, client-id or user,client-id (with --user NAME, --default client-id is that user's default client id)")
}

// entity builds the entity the flags name; for list, none is fine.
func (q *quotaEntityFlags) entity(optional bool) (kadm.ClientQuotaEntity, error) {
	var defUser, defClient bool
	for _, d := range strings.Split(q.def, ",") {
		switch strings.TrimSpace(d) {
		case "":
		case "user":
			defUser = true
		case "client-id":
			defClient = true
		default:
			return nil, usagef("--default takes user, client-id or user,client-id, not %q", d)
		}
	}
	if defUser && q.user != "" || defClient && q.clientID != "" {
		return nil, usagef("--default names the same type as --user or --client-id")
	}
	var e kadm.ClientQuotaEntity
	add := func(typ, name string, def bool) {
		switch {
		case def:
			e = append(e, kadm.ClientQuotaEntityComponent{Type: typ})
		case name != "":
			n := name
			e = append(e, kadm.ClientQuotaEntityComponent{Type: typ, Name: &n})
		}
	}
	add("user", q.user, defUser)
	add("client-id", q.clientID, defClient)
	if len(e) == 0 && !optional {
		return nil, usagef("name the entity: --user NAME, --client-id NAME and/or --default user|client-id")
	}
	return e, nil
}

func quotasSet(ctx context.Context, env *cliEnv, args []string) error {
	fs, cf := clusterFlags(env, "quotas set (--user NAME | --client-id NAME | --default TYPE)... --producer-byte-rate N ... [flags]",
		"Set client quotas of an entity: a user, a client id, or a user's client id; --default\n"+
			"names the default of a type. The most specific quota applies (Kafka's order:\n"+
			"user+client-id, user+default client-id, user, default user+client-id, ..., client-id,\n"+
			"default client-id). Over its quota a client is throttled: the broker returns a\n"+
			"throttle time and stops reading from its connection for that long.", true)
	var ef quotaEntityFlags
	ef.register(fs)
	produce := fs.String("producer-byte-rate", "", "bytes per second a client may produce (request bytes)")
	consume := fs.String("consumer-byte-rate", "", "bytes per second a client may fetch (record bytes)")
	request := fs.String("request-percentage", "", "percent of one request handler's time a client may use (100 = one thread)")
	mutation := fs.String("controller-mutation-rate", "", "partitions a client may create or delete per second (CreateTopics, CreatePartitions, DeleteTopics; a user or client id alone)")
	if _, err := cf.parse(fs, args, noArgs); err != nil {
		return err
	}
	e, err := ef.entity(false)
	if err != nil {
		return err
	}
	var ops []kadm.AlterClientQuotaOp
	for _, f := range []struct{ key, flag, val string }{
		{cluster.QuotaProducerByteRate, "producer-byte-rate", *produce},
		{cluster.QuotaConsumerByteRate, "consumer-byte-rate", *consume},
		{cluster.QuotaRequestPercentage, "request-percentage", *request},
		{cluster.QuotaControllerMutationRate, "controller-mutation-rate", *mutation},
	} {
		if f.val == "" {
			continue
		}
		v, err := strconv.ParseFloat(f.val, 64)
		if err != nil {
			return usagef("--%s: %q is not a number", f.flag, f.val)
		}
		ops = append(ops, kadm.AlterClientQuotaOp{Key: f.key, Value: v})
	}
	if len(ops) == 0 {
		return usagef("set at least one of --producer-byte-rate, --consumer-byte-rate, --request-percentage, --controller-mutation-rate")
	}
	return alterQuotasCLI(ctx, env, cf, "set", e, ops)
}

func alterQuotasCLI(ctx context.Context, env *cliEnv, cf *clientFlags, verb string, e kadm.ClientQuotaEntity, ops []kadm.AlterClientQuotaOp) error {
	ctx, adm, done, err := cf.adminSession(ctx)
	if err != nil {
		return err
	}
	defer done()
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: e, Ops: ops}})
	if err != nil {
		return errKafka(verb+" quotas", err)
	}
	name := strings.Trim(e.String(), "{}")
	results := []resultJSON{{Name: name, Status: verb}}
	var rerr error
	if len(res) == 1 && res[0].Err != nil {
		results[0].Status = "failed"
		rerr = fmt.Errorf("%s quotas of %s: %s", verb, name, kafkaMessage(res[0].Err, res[0].ErrMessage))
	}
	if err := writeResults(env, cf, "quota", results); err != nil {
		return err
	}
	return rerr
}

// quotaJSON is one entity in `quotas list` JSON output; a null user or
// client_id with its *_default true is the default entity.
type quotaJSON struct {
	User     *string            `json:"user,omitempty"`
	ClientID *string            `json:"client_id,omitempty"`
	Default  []string           `json:"default,omitempty"`
	Quotas   map[string]float64 `json:"quotas"`
}

func quotasList(ctx context.Context, env *cliEnv, args []string) error {
	fs, cf := clusterFlags(env, "quotas list [--user NAME] [--client-id NAME] [--default TYPE] [--strict] [flags]",
		"List client quotas: all, or those of the entities the flags match (--user NAME also\n"+
			"lists that user's client-id quotas unless --strict).", true)
	var ef quotaEntityFlags
	ef.register(fs)
	strict := fs.Bool("strict", false, "only entities with exactly the types named")
	if _, err := cf.parse(fs, args, noArgs); err != nil {
		return err
	}
	e, err := ef.entity(true)
	if err != nil {
		return err
	}
	var comps []kadm.DescribeClientQuotaComponent
	for _, c := range e {
		if c.Name == nil {
			comps = append(comps, kadm.DescribeClientQuotaComponent{Type: c.Type, MatchType: 1})
		} else {
			comps = append(comps, kadm.DescribeClientQuotaComponent{Type: c.Type, MatchName: c.Name, MatchType: 0})
		}
	}
	ctx, adm, done, err := cf.adminSession(ctx)
	if err != nil {
		return err
	}
	defer done()
	desc, err := adm.DescribeClientQuotas(ctx, *strict, comps)
	if err != nil {
		return errKafka("list quotas", err)
	}
	out := []quotaJSON{}
	for _, d := range desc {
		q := quotaJSON{Quotas: map[string]float64{}}
		for _, c := range d.Entity {
			switch {
			case c.Type == "user" && c.Name != nil:
				q.User = c.Name
			case c.Type == "client-id" && c.Name != nil:
				q.ClientID = c.Name
			default:
				q.Default = append(q.Default, c.Type)
			}
		}
		for _, v := range d.Values {
			q.Quotas[v.Key] = v.Value
		}
		out = append(out, q)
	}
	show := func(name *string, typ string, q quotaJSON) string {
		if name != nil {
			return *name
		}
		for _, d := range q.Default {
			if d == typ {
				return cluster.DefaultQuotaName
			}
		}
		return ""
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if ua, ub := show(a.User, "user", a), show(b.User, "user", b); ua != ub {
			return ua < ub
		}
		return show(a.ClientID, "client-id", a) < show(b.ClientID, "client-id", b)
	})
	if cf.json() {
		return writeJSON(env.stdout, out)
	}
	t := newCLITable(env.stdout, "USER", "CLIENT-ID", "QUOTA", "VALUE")
	for _, q := range out {
		keys := make([]string, 0, len(q.Quotas))
		for k := range q.Quotas {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			t.row(show(q.User, "user", q), show(q.ClientID, "client-id", q), k, strconv.FormatFloat(q.Quotas[k], 'f', -1, 64))
		}
	}
	return t.flush()
}

func quotasDelete(ctx context.Context, env *cliEnv, args []string) error {
	fs, cf := clusterFlags(env, "quotas delete (--user NAME | --client-id NAME | --default TYPE)... [--key K,...] [flags]",
		"Delete client quotas of an entity: every quota it has, or the --key ones.", true)
	var ef quotaEntityFlags
	ef.register(fs)
	var keys cliList
	fs.Var(&keys, "key", "quota keys to delete (producer_byte_rate, consumer_byte_rate, request_percentage, controller_mutation_rate); default all")
	if _, err := cf.parse(fs, args, noArgs); err != nil {
		return err
	}
	e, err := ef.entity(false)
	if err != nil {
		return err
	}
	if len(keys) == 0 {
		keys = cluster.QuotaKeys()
	}
	var ops []kadm.AlterClientQuotaOp
	for _, k := range keys {
		if !cluster.IsQuotaKey(k) {
			return usagef("--key: %q is not a quota key", k)
		}
		ops = append(ops, kadm.AlterClientQuotaOp{Key: k, Remove: true})
	}
	return alterQuotasCLI(ctx, env, cf, "deleted", e, ops)
}
