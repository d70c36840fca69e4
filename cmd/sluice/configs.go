package main

// sluice configs: what kafka-configs.sh gives a Kafka operator, for topics and
// brokers.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sort"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	registerVerbs("configs", "describe and alter topic and broker configs", configsActions)
}

var configsActions = []*cliAction{
	{"describe", "(--topic T | --broker ID | --broker-defaults)...", "show configs that differ from the defaults (--all: every config)", configsDescribe},
	{"alter", "(--topic T | --broker ID | --broker-defaults)... --set k=v --delete k", "set or remove config overrides", configsAlter},
}

// entityFlags selects the resources a configs command works on.
type entityFlags struct {
	topics         cliList
	brokers        []int32
	brokerDefaults bool
}

func (e *entityFlags) register(fs *flag.FlagSet) {
	fs.Var(&e.topics, "topic", "a topic (repeatable)")
	fs.Func("broker", "a broker id (repeatable)", func(s string) error {
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil || n < 0 {
			return fmt.Errorf("broker id %q is not a number", s)
		}
		e.brokers = append(e.brokers, int32(n))
		return nil
	})
	fs.BoolVar(&e.brokerDefaults, "broker-defaults", false, "the cluster-wide dynamic broker defaults")
}

func (e *entityFlags) validate() error {
	if len(e.topics) == 0 && len(e.brokers) == 0 && !e.brokerDefaults {
		return usagef("name what to work on: --topic T, --broker ID or --broker-defaults")
	}
	return nil
}

type configEntityJSON struct {
	Type    string       `json:"type"` // topic, broker or broker-defaults
	Name    string       `json:"name"`
	Configs []configJSON `json:"configs"`
}

type configJSON struct {
	Key       string  `json:"key"`
	Value     *string `json:"value"` // null when sensitive
	Source    string  `json:"source"`
	Sensitive bool    `json:"sensitive"`
}

func configsDescribe(ctx context.Context, env *cliEnv, args []string) error {
	var ent entityFlags
	fs, cf := clusterFlags(env, "configs describe (--topic T | --broker ID | --broker-defaults)... [--all] [flags]",
		"Show the configs of topics or brokers. By default only the overrides: a topic's\n"+
			"dynamic configs, a broker's configs that differ from the built-in defaults.\n"+
			"--all shows every config with its source.", true)
	ent.register(fs)
	all := fs.Bool("all", false, "every config, defaults included")
	if _, err := cf.parse(fs, args, positional{many: "unexpected argument %q (topics are named with --topic)"}); err != nil {
		return err
	}
	if err := ent.validate(); err != nil {
		return err
	}
	ctx, adm, done, err := cf.adminSession(ctx)
	if err != nil {
		return err
	}
	defer done()
	if err := requireBrokers(ctx, adm, ent.brokers); err != nil {
		return err
	}

	var out []configEntityJSON
	keep := func(typ string, c kadm.Config) bool {
		if *all {
			return true
		}
		switch typ {
		case "topic":
			return c.Source == kmsg.ConfigSourceDynamicTopicConfig
		case "broker-defaults":
			return c.Source == kmsg.ConfigSourceDynamicDefaultBrokerConfig
		}
		return c.Source != kmsg.ConfigSourceDefaultConfig
	}
	add := func(typ, name string, rc kadm.ResourceConfig) error {
		if rc.Err != nil {
			if errors.Is(rc.Err, kerr.UnknownTopicOrPartition) {
				return fmt.Errorf("topic %q does not exist", name)
			}
			return errKafka(typ+" "+name, fmt.Errorf("%s", kafkaMessage(rc.Err, rc.ErrMessage)))
		}
		e := configEntityJSON{Type: typ, Name: name, Configs: []configJSON{}}
		for _, c := range rc.Configs {
			if !keep(typ, c) {
				continue
			}
			e.Configs = append(e.Configs, configJSON{Key: c.Key, Value: c.Value, Source: c.Source.String(), Sensitive: c.Sensitive})
		}
		sort.Slice(e.Configs, func(i, j int) bool { return e.Configs[i].Key < e.Configs[j].Key })
		out = append(out, e)
		return nil
	}
	if len(ent.topics) > 0 {
		rcs, err := adm.DescribeTopicConfigs(ctx, ent.topics...)
		if err != nil {
			return errKafka("describe topic configs", err)
		}
		for _, t := range ent.topics {
			rc, err := rcs.On(t, nil)
			if err != nil {
				return fmt.Errorf("topic %q: the broker did not answer for this topic", t)
			}
			if err := add("topic", t, rc); err != nil {
				return err
			}
		}
	}
	for _, b := range ent.brokers {
		rcs, err := adm.DescribeBrokerConfigs(ctx, b)
		if err != nil {
			return errKafka(fmt.Sprintf("describe configs of broker %d", b), err)
		}
		name := strconv.Itoa(int(b))
		rc, err := rcs.On(name, nil)
		if err != nil {
			return fmt.Errorf("broker %d: no such broker answered", b)
		}
		if err := add("broker", name, rc); err != nil {
			return err
		}
	}
	if ent.brokerDefaults {
		rcs, err := adm.DescribeBrokerConfigs(ctx)
		if err != nil {
			return errKafka("describe broker defaults", err)
		}
		rc, err := rcs.On("", nil)
		if err != nil {
			return fmt.Errorf("broker defaults: the broker did not answer")
		}
		if err := add("broker-defaults", "", rc); err != nil {
			return err
		}
	}

	if cf.json() {
		return writeJSON(env.stdout, out)
	}
	tb := newCLITable(env.stdout, "TYPE", "NAME", "KEY", "VALUE", "SOURCE")
	for _, e := range out {
		for _, c := range e.Configs {
			v := "(sensitive)"
			switch {
			case c.Value != nil && *c.Value == "":
				v = `""`
			case c.Value != nil:
				v = *c.Value
			case !c.Sensitive:
				v = "(null)"
			}
			tb.row(e.Type, e.Name, c.Key, v, c.Source)
		}
	}
	return tb.flush()
}

func configsAlter(ctx context.Context, env *cliEnv, args []string) error {
	var ent entityFlags
	fs, cf := clusterFlags(env, "configs alter (--topic T | --broker ID | --broker-defaults)... (--set k=v | --delete k)... [flags]",
		"Set or remove config overrides of topics or brokers; other configs keep their\n"+
			"values. A value is taken verbatim, commas included (--set cleanup.policy=compact,delete).", true)
	ent.register(fs)
	var set cliKeyValues
	var del cliList
	fs.Var(&set, "set", "set key=value (repeatable)")
	fs.Var(&del, "delete", "remove the override of a key, back to its default (repeatable)")
	dryRun := fs.Bool("dry-run", false, "only validate the change on the broker")
	if _, err := cf.parse(fs, args, positional{many: "unexpected argument %q (topics are named with --topic)"}); err != nil {
		return err
	}
	if err := ent.validate(); err != nil {
		return err
	}
	pairs, err := set.pairs("set")
	if err != nil {
		return err
	}
	if len(pairs) == 0 && len(del) == 0 {
		return usagef("nothing to alter: give --set key=value or --delete key")
	}
	alters := buildAlters(pairs, del)
	ctx, adm, done, err := cf.adminSession(ctx)
	if err != nil {
		return err
	}
	defer done()
	if err := requireBrokers(ctx, adm, ent.brokers); err != nil {
		return err
	}

	okStatus := "altered"
	if *dryRun {
		okStatus = "valid"
	}
	var results []resultJSON
	var failed []string
	collect := func(label, name string, resps kadm.AlterConfigsResponses) {
		r, err := resps.On(name, nil)
		switch {
		case err != nil:
			failed = append(failed, label+": the broker did not answer")
			results = append(results, resultJSON{Name: label, Status: "failed"})
		case r.Err != nil:
			msg := kafkaMessage(r.Err, r.ErrMessage)
			if errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
				msg = "topic does not exist"
			}
			failed = append(failed, label+": "+msg)
			results = append(results, resultJSON{Name: label, Status: "failed"})
		default:
			results = append(results, resultJSON{Name: label, Status: okStatus})
		}
	}
	if len(ent.topics) > 0 {
		alter := adm.AlterTopicConfigs
		if *dryRun {
			alter = adm.ValidateAlterTopicConfigs
		}
		resps, err := alter(ctx, alters, ent.topics...)
		if err != nil {
			return errKafka("alter topic configs", err)
		}
		for _, t := range ent.topics {
			collect("topic "+t, t, resps)
		}
	}
	alterBrokers := adm.AlterBrokerConfigs
	if *dryRun {
		alterBrokers = adm.ValidateAlterBrokerConfigs
	}
	for _, b := range ent.brokers {
		resps, err := alterBrokers(ctx, alters, b)
		if err != nil {
			return errKafka(fmt.Sprintf("alter configs of broker %d", b), err)
		}
		collect(fmt.Sprintf("broker %d", b), strconv.Itoa(int(b)), resps)
	}
	if ent.brokerDefaults {
		resps, err := alterBrokers(ctx, alters)
		if err != nil {
			return errKafka("alter broker defaults", err)
		}
		collect("broker-defaults", "", resps)
	}
	if err := writeResults(env, cf, "resource", results); err != nil {
		return err
	}
	return failures("alter", failed)
}
