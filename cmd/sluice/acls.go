package main

// sluice acls: what kafka-acls.sh gives a Kafka operator, through the
// CreateAcls, DescribeAcls and DeleteAcls APIs.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/security"
)

func init() {
	registerVerbs("acls", "add, list and remove ACLs (as kafka-acls.sh)", aclsActions)
}

var aclsActions = []*cliAction{
	{"add", "", "add ACLs: --allow-principal/--deny-principal, --operation, and --topic/--group/--cluster/--transactional-id", aclsAdd},
	{"list", "", "list ACLs, all or those of the resources and principals given", aclsList},
	{"remove", "", "remove the ACLs of the resources given (only those of the principals, hosts and operations given)", aclsRemove},
}

// aclFlags are kafka-acls.sh's options.
type aclFlags struct {
	allow, deny             cliList // --allow-principal, --deny-principal
	allowHosts, denyHosts   cliList // --allow-host, --deny-host
	principals              cliList // --principal (list)
	operations              cliList // --operation
	topics, groups, txnIDs  cliList // --topic, --group, --transactional-id
	cluster                 bool    // --cluster
	pattern                 string  // --resource-pattern-type
	producer, consumer      bool    // --producer, --consumer
	idempotent              bool    // --idempotent (with --producer)
	defaultPattern, command string
}

func (f *aclFlags) register(fs *flag.FlagSet, command string) {
	f.command = command
	fs.Var(&f.topics, "topic", "a topic (repeatable; * for every topic)")
	fs.Var(&f.groups, "group", "a consumer group (repeatable; * for every group)")
	fs.Var(&f.txnIDs, "transactional-id", "a transactional id (repeatable; * for every one)")
	fs.BoolVar(&f.cluster, "cluster", false, "the cluster resource")
	switch command {
	case "list":
		f.defaultPattern = "any"
		fs.Var(&f.principals, "principal", "only the ACLs of this principal, e.g. User:alice (repeatable)")
		fs.StringVar(&f.pattern, "resource-pattern-type", f.defaultPattern, "literal, prefixed, any (literal and prefixed of exactly the names) or match (every ACL that applies to the names)")
		return
	case "add":
		f.defaultPattern = "literal"
		fs.StringVar(&f.pattern, "resource-pattern-type", f.defaultPattern, "literal or prefixed (the names are prefixes)")
		fs.BoolVar(&f.producer, "producer", false, "the ACLs of a producer: Write, Describe and Create on the topics")
		fs.BoolVar(&f.idempotent, "idempotent", false, "with --producer: IdempotentWrite on the cluster too")
		fs.BoolVar(&f.consumer, "consumer", false, "the ACLs of a consumer: Read and Describe on the topics, Read on the groups")
	case "remove":
		f.defaultPattern = "literal"
		fs.StringVar(&f.pattern, "resource-pattern-type", f.defaultPattern, "literal, prefixed, any or match, as for list")
	}
	fs.Var(&f.allow, "allow-principal", "a principal the ACLs allow, e.g. User:alice or User:* (repeatable)")
	fs.Var(&f.deny, "deny-principal", "a principal the ACLs deny (repeatable)")
	fs.Var(&f.allowHosts, "allow-host", "an IP address the allowed principals may connect from (repeatable; default *)")
	fs.Var(&f.denyHosts, "deny-host", "an IP address the denied principals are denied from (repeatable; default *)")
	fs.Var(&f.operations, "operation", "Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite or All (repeatable)")
}

// resources are the resource patterns the flags name.
func (f *aclFlags) resources() ([]security.Resource, error) {
	pattern, err := security.ParsePatternType(f.pattern)
	if err != nil {
		return nil, usagef("--resource-pattern-type: %v", err)
	}
	switch f.command {
	case "add":
		if pattern != security.PatternLiteral && pattern != security.PatternPrefixed {
			return nil, usagef("--resource-pattern-type must be literal or prefixed to add ACLs, not %s", f.pattern)
		}
	}
	var out []security.Resource
	add := func(t security.ResourceType, names []string) {
		for _, n := range names {
			out = append(out, security.Resource{Type: t, Name: n, Pattern: pattern})
		}
	}
	add(security.ResourceTopic, f.topics)
	add(security.ResourceGroup, f.groups)
	add(security.ResourceTransactionalID, f.txnIDs)
	if f.cluster {
		add(security.ResourceCluster, []string{security.ClusterName})
	}
	return out, nil
}

// operationsFor are the operations the flags give for a resource type
// (--operation, or what --producer and --consumer mean for it), each
// checked against what the type supports.
func (f *aclFlags) operationsFor(t security.ResourceType) ([]security.Operation, error) {
	var ops []security.Operation
	for _, o := range f.operations {
		op, err := security.ParseOperation(o)
		if err != nil || op == security.OpAny || op == security.OpUnknown {
			return nil, usagef("--operation %q: not an operation (Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, All)", o)
		}
		if !security.Supports(t, op) {
			return nil, usagef("--operation %s does not apply to a %s; a %s takes %s", op, t, t, opNames(security.SupportedOperations(t)))
		}
		ops = append(ops, op)
	}
	if f.producer {
		switch t {
		case security.ResourceTopic:
			ops = append(ops, security.OpWrite, security.OpDescribe, security.OpCreate)
		case security.ResourceTransactionalID:
			ops = append(ops, security.OpWrite, security.OpDescribe)
		}
	}
	if f.consumer {
		switch t {
		case security.ResourceTopic:
			ops = append(ops, security.OpRead, security.OpDescribe)
		case security.ResourceGroup:
			ops = append(ops, security.OpRead)
		}
	}
	return ops, nil
}

func opNames(ops []security.Operation) string {
	names := make([]string, len(ops))
	for i, o := range ops {
		names[i] = o.String()
	}
	return strings.Join(names, ", ")
}

// aclPrincipal is a principal the flags name, with the hosts given for
// it (none: any) and its permission.
type aclPrincipal struct {
	principal  string
	hosts      []string
	permission security.Permission
}

// principalsNamed are the principals the flags name, each checked: --principal
// (list: any permission, any host), or --allow-principal with
// --allow-host and --deny-principal with --deny-host.
func (f *aclFlags) principalsNamed() ([]aclPrincipal, error) {
	sides := []struct {
		principals, hosts cliList
		perm              security.Permission
	}{{f.allow, f.allowHosts, security.Allow}, {f.deny, f.denyHosts, security.Deny}}
	if f.command == "list" {
		sides = sides[:1]
		sides[0].principals, sides[0].hosts, sides[0].perm = f.principals, nil, security.PermissionAny
	}
	var out []aclPrincipal
	for _, side := range sides {
		for _, p := range side.principals {
			if _, err := security.ParsePrincipal(p); err != nil {
				return nil, usagef("%v", err)
			}
			out = append(out, aclPrincipal{principal: p, hosts: side.hosts, permission: side.perm})
		}
	}
	return out, nil
}

// entries are the principal and host pairs with their permission.
type aclParty struct {
	principal, host string
	permission      security.Permission
}

// parties are the entries of ACLs to add: a principal without --*-host
// may connect from any host (*).
func (f *aclFlags) parties() ([]aclParty, error) {
	named, err := f.principalsNamed()
	if err != nil {
		return nil, err
	}
	var out []aclParty
	for _, p := range named {
		hosts := p.hosts
		if len(hosts) == 0 {
			hosts = []string{security.Wildcard}
		}
		for _, h := range hosts {
			out = append(out, aclParty{principal: p.principal, host: h, permission: p.permission})
		}
	}
	return out, nil
}

type aclJSON struct {
	Principal    string `json:"principal"`
	Host         string `json:"host"`
	Operation    string `json:"operation"`
	Permission   string `json:"permission"`
	ResourceType string `json:"resource_type"`
	Name         string `json:"name"`
	PatternType  string `json:"pattern_type"`
	Error        string `json:"error,omitempty"`
}

func aclJSONOf(a security.ACL, err error) aclJSON {
	j := aclJSON{Principal: a.Entry.Principal, Host: a.Entry.Host, Operation: a.Entry.Operation.String(),
		Permission: a.Entry.Permission.String(), ResourceType: a.Resource.Type.String(), Name: a.Resource.Name,
		PatternType: strings.ToLower(a.Resource.Pattern.String())}
	if err != nil {
		j.Error = err.Error()
	}
	return j
}

func writeACLs(env *cliEnv, cf *clientFlags, rows []aclJSON) error {
	if cf.json() {
		if rows == nil {
			rows = []aclJSON{}
		}
		return writeJSON(env.stdout, rows)
	}
	withErr := false
	for _, r := range rows {
		withErr = withErr || r.Error != ""
	}
	headers := []string{"RESOURCE-TYPE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION"}
	if withErr {
		headers = append(headers, "ERROR")
	}
	tb := newCLITable(env.stdout, headers...)
	for _, r := range rows {
		cols := []any{r.ResourceType, r.Name, r.PatternType, r.Principal, r.Host, r.Operation, r.Permission}
		if withErr {
			cols = append(cols, r.Error)
		}
		tb.row(cols...)
	}
	return tb.flush()
}

// aclErr is a result's error code and message as an error (nil for 0).
func aclErr(code int16, msg *string) error {
	if code == 0 {
		return nil
	}
	err := kerr.ErrorForCode(code)
	if msg != nil && *msg != "" {
		return fmt.Errorf("%w: %s", err, *msg)
	}
	return err
}

func aclsAdd(ctx context.Context, env *cliEnv, args []string) error {
	fs, cf := clusterFlags(env, "acls add --allow-principal P|--deny-principal P --operation OP|--producer|--consumer --topic T|--group G|--cluster|--transactional-id X [flags]",
		"Add ACLs: every principal (with each of its hosts) gets every operation on every resource named.\n"+
			"Example: sluice acls add --allow-principal User:alice --operation Read --topic orders- --resource-pattern-type prefixed", true)
	var f aclFlags
	f.register(fs, "add")
	if _, err := cf.parse(fs, args, noArgs); err != nil {
		return err
	}
	resources, err := f.resources()
	if err != nil {
		return err
	}
	if f.idempotent && f.producer {
		resources = append(resources, security.Resource{Type: security.ResourceCluster, Name: security.ClusterName, Pattern: security.PatternLiteral})
	}
	parties, err := f.parties()
	switch {
	case err != nil:
		return err
	case len(resources) == 0:
		return usagef("name a resource: --topic, --group, --cluster or --transactional-id")
	case len(parties) == 0:
		return usagef("name a principal: --allow-principal or --deny-principal")
	case len(f.operations) == 0 && !f.producer && !f.consumer:
		return usagef("name an operation: --operation, --producer or --consumer")
	}
	var acls []security.ACL
	for _, r := range resources {
		ops, err := f.operationsFor(r.Type)
		if err != nil {
			return err
		}
		if f.idempotent && r.Type == security.ResourceCluster && !f.cluster {
			ops = []security.Operation{security.OpIdempotentWrite}
		}
		for _, p := range parties {
			for _, op := range ops {
				acls = append(acls, security.ACL{Resource: r, Entry: security.Entry{Principal: p.principal, Host: p.host, Operation: op, Permission: p.permission}})
			}
		}
	}
	if len(acls) == 0 {
		return usagef("--producer and --consumer give no operation for the resources named")
	}
	return withKafka(ctx, cf, func(ctx context.Context, cl *kgo.Client) error {
		req := kmsg.NewPtrCreateACLsRequest()
		for _, a := range acls {
			c := kmsg.NewCreateACLsRequestCreation()
			c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceType(a.Resource.Type), a.Resource.Name, kmsg.ACLResourcePatternType(a.Resource.Pattern)
			c.Principal, c.Host = a.Entry.Principal, a.Entry.Host
			c.Operation, c.PermissionType = kmsg.ACLOperation(a.Entry.Operation), kmsg.ACLPermissionType(a.Entry.Permission)
			req.Creations = append(req.Creations, c)
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return errKafka("create ACLs", err)
		}
		if len(resp.Results) != len(acls) {
			return fmt.Errorf("create ACLs: %d results for %d ACLs", len(resp.Results), len(acls))
		}
		rows := make([]aclJSON, len(acls))
		var failed int
		for i, r := range resp.Results {
			err := aclErr(r.ErrorCode, r.ErrorMessage)
			if err != nil {
				failed++
			}
			rows[i] = aclJSONOf(acls[i], err)
		}
		if err := writeACLs(env, cf, rows); err != nil {
			return err
		}
		if failed > 0 {
			return fmt.Errorf("%d of %d ACLs were not added", failed, len(acls))
		}
		return nil
	})
}

// filters are the DescribeAcls/DeleteAcls filters the flags give: each
// resource (or every resource) with each principal given (or any), each
// host given (or any) and each operation given (or any).
func (f *aclFlags) filters() ([]security.Filter, error) {
	resources, err := f.resources()
	if err != nil {
		return nil, err
	}
	type party struct {
		principal, host *string
		perm            security.Permission
	}
	named, err := f.principalsNamed()
	if err != nil {
		return nil, err
	}
	var parties []party
	for _, p := range named {
		if len(p.hosts) == 0 {
			parties = append(parties, party{principal: &p.principal, perm: p.permission})
		}
		for _, h := range p.hosts {
			parties = append(parties, party{principal: &p.principal, host: &h, perm: p.permission})
		}
	}
	if len(parties) == 0 {
		parties = []party{{perm: security.PermissionAny}}
	}
	var base []security.ResourceFilter
	for _, r := range resources {
		name := r.Name
		base = append(base, security.ResourceFilter{Type: r.Type, Name: &name, Pattern: r.Pattern})
	}
	if len(base) == 0 {
		pattern, _ := security.ParsePatternType(f.pattern)
		base = []security.ResourceFilter{{Type: security.ResourceAny, Pattern: pattern}}
	}
	var out []security.Filter
	for _, rf := range base {
		ops := []security.Operation{security.OpAny}
		if len(f.operations) > 0 {
			t := rf.Type
			if t == security.ResourceAny {
				t = security.ResourceTopic
			}
			if ops, err = f.operationsFor(t); err != nil {
				return nil, err
			}
		}
		for _, p := range parties {
			for _, op := range ops {
				out = append(out, security.Filter{Resource: rf, Entry: security.EntryFilter{Principal: p.principal, Host: p.host, Operation: op, Permission: p.perm}})
			}
		}
	}
	return out, nil
}

func aclsList(ctx context.Context, env *cliEnv, args []string) error {
	fs, cf := clusterFlags(env, "acls list [--topic T|--group G|--cluster|--transactional-id X]... [--principal P]... [flags]",
		"List ACLs: every ACL, or those of the resources named (with --resource-pattern-type match: every ACL\n"+
			"that applies to them, through * and prefixes too), or those of the principals named.", true)
	var f aclFlags
	f.register(fs, "list")
	if _, err := cf.parse(fs, args, noArgs); err != nil {
		return err
	}
	filters, err := f.filters()
	if err != nil {
		return err
	}
	return withKafka(ctx, cf, func(ctx context.Context, cl *kgo.Client) error {
		var rows []aclJSON
		seen := map[security.ACL]bool{}
		for _, flt := range filters {
			req := kmsg.NewPtrDescribeACLsRequest()
			req.ResourceType, req.ResourceName, req.ResourcePatternType = kmsg.ACLResourceType(flt.Resource.Type), flt.Resource.Name, kmsg.ACLResourcePatternType(flt.Resource.Pattern)
			req.Principal, req.Host = flt.Entry.Principal, flt.Entry.Host
			req.Operation, req.PermissionType = kmsg.ACLOperation(flt.Entry.Operation), kmsg.ACLPermissionType(flt.Entry.Permission)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return errKafka("describe ACLs", err)
			}
			if err := aclErr(resp.ErrorCode, resp.ErrorMessage); err != nil {
				return explainACLErr("describe ACLs", err)
			}
			for _, r := range resp.Resources {
				for _, e := range r.ACLs {
					a := security.ACL{
						Resource: security.Resource{Type: security.ResourceType(r.ResourceType), Name: r.ResourceName, Pattern: security.PatternType(r.ResourcePatternType)},
						Entry:    security.Entry{Principal: e.Principal, Host: e.Host, Operation: security.Operation(e.Operation), Permission: security.Permission(e.PermissionType)},
					}
					if !seen[a] {
						seen[a] = true
						rows = append(rows, aclJSONOf(a, nil))
					}
				}
			}
		}
		return writeACLs(env, cf, rows)
	})
}

func aclsRemove(ctx context.Context, env *cliEnv, args []string) error {
	fs, cf := clusterFlags(env, "acls remove --topic T|--group G|--cluster|--transactional-id X [--allow-principal P] [--deny-principal P] [--operation OP] [flags]",
		"Remove the ACLs of the resources named: all of them, or only those of the principals, hosts and\n"+
			"operations given. Prints what was removed.", true)
	var f aclFlags
	f.register(fs, "remove")
	if _, err := cf.parse(fs, args, noArgs); err != nil {
		return err
	}
	if len(f.topics)+len(f.groups)+len(f.txnIDs) == 0 && !f.cluster {
		return usagef("name a resource: --topic, --group, --cluster or --transactional-id")
	}
	filters, err := f.filters()
	if err != nil {
		return err
	}
	return withKafka(ctx, cf, func(ctx context.Context, cl *kgo.Client) error {
		req := kmsg.NewPtrDeleteACLsRequest()
		for _, flt := range filters {
			rf := kmsg.NewDeleteACLsRequestFilter()
			rf.ResourceType, rf.ResourceName, rf.ResourcePatternType = kmsg.ACLResourceType(flt.Resource.Type), flt.Resource.Name, kmsg.ACLResourcePatternType(flt.Resource.Pattern)
			rf.Principal, rf.Host = flt.Entry.Principal, flt.Entry.Host
			rf.Operation, rf.PermissionType = kmsg.ACLOperation(flt.Entry.Operation), kmsg.ACLPermissionType(flt.Entry.Permission)
			req.Filters = append(req.Filters, rf)
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return errKafka("delete ACLs", err)
		}
		var rows []aclJSON
		var errs []error
		for _, r := range resp.Results {
			if err := aclErr(r.ErrorCode, r.ErrorMessage); err != nil {
				errs = append(errs, err)
				continue
			}
			for _, m := range r.MatchingACLs {
				a := security.ACL{
					Resource: security.Resource{Type: security.ResourceType(m.ResourceType), Name: m.ResourceName, Pattern: security.PatternType(m.ResourcePatternType)},
					Entry:    security.Entry{Principal: m.Principal, Host: m.Host, Operation: security.Operation(m.Operation), Permission: security.Permission(m.PermissionType)},
				}
				rows = append(rows, aclJSONOf(a, aclErr(m.ErrorCode, m.ErrorMessage)))
			}
		}
		if len(errs) > 0 {
			return explainACLErr("delete ACLs", errors.Join(errs...))
		}
		return writeACLs(env, cf, rows)
	})
}

// explainACLErr adds what to do to the errors an operator meets first.
func explainACLErr(what string, err error) error {
	switch {
	case errors.Is(err, kerr.SecurityDisabled):
		return fmt.Errorf("%s: %w (set authorizer.class.name=kafka.security.authorizer.AclAuthorizer on the brokers)", what, err)
	case errors.Is(err, kerr.ClusterAuthorizationFailed):
		return fmt.Errorf("%s: %w (managing ACLs needs Alter on the cluster, listing them Describe; or a principal in super.users)", what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// withKafka connects and runs fn within --timeout.
func withKafka(ctx context.Context, cf *clientFlags, fn func(context.Context, *kgo.Client) error) error {
	ctx, cancel := context.WithTimeout(ctx, cf.timeout)
	defer cancel()
	cl, err := cf.client(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	return fn(ctx, cl)
}
