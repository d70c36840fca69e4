package kafkasec

import (
	"errors"
	"net/netip"
	"net/url"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/security"
	"github.com/sluice-io/sluice/templates"
	tpl "github.com/sluice-io/sluice/templates/kafkasec"
	"github.com/sluice-io/sluice/web"
)

// GET /acls, POST /acls, GET and POST /acls/delete: the ACLs
// (DescribeAcls, CreateAcls, DeleteAcls) with Kafka's filter semantics.

// aclFilter is Kafka's AclBindingFilter as the forms give it: an empty
// name, principal or host matches every one; Any matches every type,
// operation, permission; the pattern is Any (the literal and the prefixed
// pattern of the name), Match (every pattern that applies to a resource of
// that name), Literal or Prefixed.
type aclFilter struct {
	rt         security.ResourceType
	name       string
	pattern    security.PatternType
	principal  string
	host       string
	op         security.Operation
	permission security.Permission
}

// values is the filter as query parameters (empty ones left out).
func (f aclFilter) values() url.Values {
	v := url.Values{}
	set := func(k, s string) {
		if s != "" {
			v.Set(k, s)
		}
	}
	if f.rt != security.ResourceAny {
		set("type", f.rt.String())
	}
	set("name", f.name)
	set("pattern", f.pattern.String())
	set("principal", f.principal)
	set("host", f.host)
	if f.op != security.OpAny {
		set("operation", f.op.String())
	}
	if f.permission != security.PermissionAny {
		set("permission", f.permission.String())
	}
	return v
}

// String is the filter in Kafka's words.
func (f aclFilter) String() string {
	name, principal, host := f.name, f.principal, f.host
	if name == "" {
		name = "<any>"
	}
	if principal == "" {
		principal = "<any>"
	}
	if host == "" {
		host = "<any>"
	}
	return "ResourcePatternFilter(resourceType=" + f.rt.Upper() + ", name=" + name + ", patternType=" + f.pattern.Upper() + ") " +
		"(principal=" + principal + ", host=" + host + ", operation=" + f.op.Upper() + ", permissionType=" + f.permission.Upper() + ")"
}

// parseFilter reads a filter from get (query or form values), recording
// field errors in form. Without a pattern, a name is matched as Kafka's
// MATCH filter does (every binding that applies to a resource of that
// name), and no name as ANY.
func parseFilter(get func(string, ...string) string, form *templates.Form) aclFilter {
	f := aclFilter{rt: security.ResourceAny, op: security.OpAny, permission: security.PermissionAny, pattern: security.PatternAny}
	val := func(k string) string { s := strings.TrimSpace(strings.Clone(get(k))); form.Set(k, s); return s }
	if s := val("type"); s != "" {
		rt, err := security.ParseResourceType(s)
		if err != nil || !consoleType(rt) && rt != security.ResourceAny {
			form.Fail("type", "Pick Topic, Group, Cluster or TransactionalId.")
		}
		f.rt = rt
	}
	f.name = val("name")
	if s := val("pattern"); s != "" {
		p, err := security.ParsePatternType(s)
		if err != nil || p == security.PatternUnknown {
			form.Fail("pattern", "Pick Any, Match, Literal or Prefixed.")
		}
		f.pattern = p
	} else if f.name != "" {
		f.pattern = security.PatternMatch
	}
	if f.principal = val("principal"); f.principal != "" {
		if _, err := security.ParsePrincipal(f.principal); err != nil {
			form.Fail("principal", "A principal is Type:name, for example User:alice (or User:* for everyone).")
		}
	}
	f.host = val("host")
	if s := val("operation"); s != "" {
		op, err := security.ParseOperation(s)
		if err != nil || op == security.OpUnknown {
			form.Fail("operation", "Unknown operation "+s+".")
		}
		f.op = op
	}
	if s := val("permission"); s != "" {
		p, err := security.ParsePermission(s)
		if err != nil || p == security.PermissionUnknown {
			form.Fail("permission", "Pick Allow or Deny.")
		}
		f.permission = p
	}
	return f
}

// consoleType reports whether the console manages ACLs of rt (the types
// of Kafka's ZooKeeper-mode authorizer that clients use).
func consoleType(rt security.ResourceType) bool {
	switch rt {
	case security.ResourceTopic, security.ResourceGroup, security.ResourceCluster, security.ResourceTransactionalID:
		return true
	}
	return false
}

// builder is the filter as a kadm ACL builder (for describing and
// deleting).
func (f aclFilter) builder() *kadm.ACLBuilder {
	b := kadm.NewACLs()
	var names, principals, hosts []string
	if f.name != "" {
		names = []string{f.name}
	}
	if f.principal != "" {
		principals = []string{f.principal}
	}
	if f.host != "" {
		hosts = []string{f.host}
	}
	switch f.rt {
	case security.ResourceTopic:
		b.Topics(names...)
	case security.ResourceGroup:
		b.Groups(names...)
	case security.ResourceCluster:
		b.Clusters()
	case security.ResourceTransactionalID:
		b.TransactionalIDs(names...)
	default:
		b.AnyResource(names...)
	}
	if f.permission != security.Deny {
		b.Allow(principals...).AllowHosts(hosts...)
	}
	if f.permission != security.Allow {
		b.Deny(principals...).DenyHosts(hosts...)
	}
	if f.op == security.OpAny {
		b.Operations()
	} else {
		b.Operations(kmsg.ACLOperation(f.op))
	}
	b.ResourcePatternType(kadm.ACLPattern(f.pattern))
	return b
}

// row is a binding as the list shows it.
func row(a security.ACL) tpl.ACL {
	exact := aclFilter{rt: a.Resource.Type, name: a.Resource.Name, pattern: a.Resource.Pattern,
		principal: a.Entry.Principal, host: a.Entry.Host, op: a.Entry.Operation, permission: a.Entry.Permission}
	return tpl.ACL{
		Type: a.Resource.Type.String(), Name: a.Resource.Name, Pattern: a.Resource.Pattern.String(),
		Principal: a.Entry.Principal, Host: a.Entry.Host, Operation: a.Entry.Operation.String(), Permission: a.Entry.Permission.String(),
		Kafka: a.String(), RemoveURL: "/acls/delete?" + exact.values().Encode(),
	}
}

func bindingOf(t kmsg.ACLResourceType, name string, p kmsg.ACLResourcePatternType, principal, host string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) security.ACL {
	return security.ACL{
		Resource: security.Resource{Type: security.ResourceType(t), Name: name, Pattern: security.PatternType(p)},
		Entry:    security.Entry{Principal: principal, Host: host, Operation: security.Operation(op), Permission: security.Permission(perm)},
	}
}

// describe lists the bindings f selects, sorted as Kafka sorts them.
func (h handler) describe(c *fiber.Ctx, f aclFilter) ([]security.ACL, error) {
	ctx, cancel := ctxOf(c)
	defer cancel()
	results, err := h.adm().DescribeACLs(ctx, f.builder())
	if err != nil {
		return nil, err
	}
	seen := map[security.ACL]bool{}
	var out []security.ACL
	for _, r := range results {
		if r.Err != nil {
			return nil, kafkaErr(r.Err, r.ErrMessage)
		}
		for _, d := range r.Described {
			a := bindingOf(d.Type, d.Name, d.Pattern, d.Principal, d.Host, d.Operation, d.Permission)
			if !seen[a] {
				seen[a] = true
				out = append(out, a)
			}
		}
	}
	security.SortACLs(out)
	return out, nil
}

func newACLForm() templates.Form {
	return templates.NewForm("type", "Topic", "pattern", "Literal", "host", "*", "operation", "Read", "permission", "Allow")
}

// GET /acls[?principal=&type=&name=&pattern=]
func (h handler) acls(c *fiber.Ctx) error {
	return h.aclsPage(c, fiber.StatusOK, newACLForm(), nil)
}

func (h handler) aclsPage(c *fiber.Ctx, status int, form templates.Form, preview *tpl.Preview) error {
	v := tpl.ACLsView{Form: form, Preview: preview, Filter: templates.NewForm()}
	f := parseFilter(c.Query, &v.Filter)
	v.Filtered = f != aclFilter{rt: security.ResourceAny, op: security.OpAny, permission: security.PermissionAny, pattern: security.PatternAny}
	if v.Filtered && v.Filter.OK() {
		v.RemoveMatching = "/acls/delete?" + f.values().Encode()
	}
	if v.Filter.OK() {
		acls, err := h.describe(c, f)
		if err != nil {
			v.Refused = refusal(err, "Describe")
			v.NoAuthorizer = errors.Is(err, kerr.SecurityDisabled)
			if v.Refused == "" {
				return web.Unavailable(err)
			}
		}
		for _, a := range acls {
			v.ACLs = append(v.ACLs, row(a))
		}
	} else if status == fiber.StatusOK {
		status = fiber.StatusUnprocessableEntity
	}
	if web.WantsJSON(c) {
		return c.Status(status).JSON(fiber.Map{"acls": v.ACLs, "refused": v.Refused, "fields": mergeErrors(v.Filter, v.Form)})
	}
	return web.Render(c, status, tpl.ACLsPage(web.PageFor(c, "ACLs"), v))
}

func mergeErrors(fs ...templates.Form) map[string]string {
	out := map[string]string{}
	for _, f := range fs {
		for k, e := range f.Errors {
			out[k] = e
		}
	}
	return out
}

// parseBinding reads the add form: one concrete binding.
func parseBinding(get func(string, ...string) string) (security.ACL, templates.Form) {
	f := templates.NewForm()
	val := func(k string) string { s := strings.TrimSpace(strings.Clone(get(k))); f.Set(k, s); return s }
	var a security.ACL
	rt, err := security.ParseResourceType(val("type"))
	if err != nil || !consoleType(rt) {
		f.Fail("type", "Pick Topic, Group, Cluster or TransactionalId.")
	}
	a.Resource.Type = rt
	a.Resource.Name = val("name")
	pattern, err := security.ParsePatternType(val("pattern"))
	if err != nil || pattern != security.PatternLiteral && pattern != security.PatternPrefixed {
		f.Fail("pattern", "Pick Literal (this name, or * for every one) or Prefixed (every name that starts with it).")
	}
	a.Resource.Pattern = pattern
	if rt == security.ResourceCluster {
		// The cluster has one name.
		a.Resource.Name, a.Resource.Pattern = security.ClusterName, security.PatternLiteral
		f.Set("name", security.ClusterName)
		f.Set("pattern", "Literal")
		delete(f.Errors, "pattern")
	} else {
		switch {
		case a.Resource.Name == "":
			f.Fail("name", "Enter the resource's name, or * for every one.")
		case strings.Contains(a.Resource.Name, "/"):
			f.Fail("name", "A name cannot contain '/' (Kafka stores ACLs under it in ZooKeeper).")
		case len(a.Resource.Name) > 1024:
			f.Fail("name", "At most 1024 bytes.")
		case a.Resource.Name == security.Wildcard && pattern == security.PatternPrefixed:
			f.Fail("pattern", "* is a literal name (every resource); a prefixed * would match only names starting with '*'.")
		}
	}
	a.Entry.Principal = val("principal")
	if p, err := security.ParsePrincipal(a.Entry.Principal); err != nil || p.Name == "" {
		f.Fail("principal", "A principal is Type:name, for example User:alice (or User:* for everyone).")
	}
	a.Entry.Host = val("host")
	if a.Entry.Host == "" {
		a.Entry.Host = security.Wildcard
		f.Set("host", a.Entry.Host)
	}
	if a.Entry.Host != security.Wildcard {
		if ip, err := netip.ParseAddr(a.Entry.Host); err != nil || ip.Zone() != "" {
			f.Fail("host", "An IP address (brokers compare the client's address), or * for every host.")
		}
	}
	op, err := security.ParseOperation(val("operation"))
	switch {
	case err != nil || op <= security.OpAny:
		f.Fail("operation", "Pick an operation.")
	case consoleType(rt) && !security.Supports(rt, op):
		names := []string{}
		for _, o := range security.SupportedOperations(rt) {
			names = append(names, o.String())
		}
		f.Fail("operation", rt.String()+" has no "+op.String()+" operation; pick one of "+strings.Join(names, ", ")+".")
	}
	a.Entry.Operation = op
	perm, err := security.ParsePermission(val("permission"))
	if err != nil || perm != security.Allow && perm != security.Deny {
		f.Fail("permission", "Pick Allow or Deny.")
	}
	a.Entry.Permission = perm
	return a, f
}

// preview says what a binding grants, in kafka-acls.sh's words and a
// sentence.
func preview(a security.ACL, bootstrap string) *tpl.Preview {
	r, e := a.Resource, a.Entry
	p := &tpl.Preview{Kafka: "Adding ACLs for resource `" + r.String() + "`: \n \t" + e.String() + " \n"}
	cmd := []string{"kafka-acls.sh", "--bootstrap-server", bootstrap, "--add"}
	verb := "allow"
	if e.Permission == security.Deny {
		verb = "deny"
	}
	cmd = append(cmd, "--"+verb+"-principal", shellQuote(e.Principal))
	if e.Host != security.Wildcard {
		cmd = append(cmd, "--"+verb+"-host", e.Host)
	}
	cmd = append(cmd, "--operation", e.Operation.String())
	switch r.Type {
	case security.ResourceTopic:
		cmd = append(cmd, "--topic", shellQuote(r.Name))
	case security.ResourceGroup:
		cmd = append(cmd, "--group", shellQuote(r.Name))
	case security.ResourceCluster:
		cmd = append(cmd, "--cluster")
	case security.ResourceTransactionalID:
		cmd = append(cmd, "--transactional-id", shellQuote(r.Name))
	}
	if r.Pattern == security.PatternPrefixed {
		cmd = append(cmd, "--resource-pattern-type", "prefixed")
	}
	p.Command = strings.Join(cmd, " ")

	kind := map[security.ResourceType]string{security.ResourceTopic: "topic", security.ResourceGroup: "consumer group",
		security.ResourceTransactionalID: "transactional id"}[r.Type]
	var what string
	switch {
	case r.Type == security.ResourceCluster:
		what = "the cluster"
	case r.Name == security.Wildcard:
		what = "every " + kind
	case r.Pattern == security.PatternPrefixed:
		what = "every " + kind + " whose name starts with " + r.Name
	default:
		what = "the " + kind + " " + r.Name
	}
	who := e.Principal
	if who == security.WildcardPrincipal.String() {
		who = "every principal"
	}
	from := "from any host"
	if e.Host != security.Wildcard {
		from = "connecting from " + e.Host
	}
	op := e.Operation.String()
	if e.Operation == security.OpAll {
		op = "every operation (All)"
	}
	if e.Permission == security.Allow {
		p.Says = "Allows " + who + " " + op + " on " + what + " " + from + ", unless a Deny matches."
		switch e.Operation {
		case security.OpRead, security.OpWrite, security.OpDelete, security.OpAlter:
			p.Implied = []string{"Describe"}
		case security.OpAlterConfigs:
			p.Implied = []string{"DescribeConfigs"}
		case security.OpAll:
			for _, o := range security.SupportedOperations(r.Type) {
				if o != security.OpAll {
					p.Implied = append(p.Implied, o.String())
				}
			}
		}
	} else {
		p.Says = "Denies " + who + " " + op + " on " + what + " " + from + ". A Deny wins over every Allow; super users (super.users) are not affected."
	}
	return p
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:@=,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// bootstrapOf is a broker address for the preview's command: the
// console's first seed broker.
func (h handler) bootstrapOf() string {
	if h.seeds != nil {
		if seeds := h.seeds(); len(seeds) > 0 {
			return seeds[0]
		}
	}
	return "BROKER:9092"
}

// POST /acls: with do=preview, show what the binding grants; otherwise add
// it (CreateAcls).
func (h handler) createACL(c *fiber.Ctx) error {
	a, form := parseBinding(c.FormValue)
	if !form.OK() {
		return h.aclsPage(c, fiber.StatusUnprocessableEntity, form, nil)
	}
	pv := preview(a, h.bootstrapOf())
	if c.FormValue("do") == "preview" {
		return h.aclsPage(c, fiber.StatusOK, form, pv)
	}
	b := kadm.NewACLs()
	switch a.Resource.Type {
	case security.ResourceTopic:
		b.Topics(a.Resource.Name)
	case security.ResourceGroup:
		b.Groups(a.Resource.Name)
	case security.ResourceCluster:
		b.Clusters()
	case security.ResourceTransactionalID:
		b.TransactionalIDs(a.Resource.Name)
	}
	if a.Entry.Permission == security.Allow {
		b.Allow(a.Entry.Principal).AllowHosts(a.Entry.Host)
	} else {
		b.Deny(a.Entry.Principal).DenyHosts(a.Entry.Host)
	}
	b.Operations(kmsg.ACLOperation(a.Entry.Operation)).ResourcePatternType(kadm.ACLPattern(a.Resource.Pattern))
	ctx, cancel := ctxOf(c)
	defer cancel()
	results, err := h.adm().CreateACLs(ctx, b)
	if err == nil {
		for _, r := range results {
			if r.Err != nil {
				err = kafkaErr(r.Err, r.ErrMessage)
				break
			}
		}
	}
	web.Audit(c, "acl.create", a.Resource.String(), a.Entry.String(), err)
	if err != nil {
		if form.Err = refusal(err, "Alter"); form.Err == "" {
			form.Err = "Not added: " + err.Error()
		}
		return h.aclsPage(c, fiber.StatusUnprocessableEntity, form, pv)
	}
	web.Flash(c, "ok", "ACL added: "+pv.Says)
	return web.SeeOther(c, "/acls")
}

// deleteFilter reads the removal's filter; a filter that selects every
// binding is refused (name a principal or a resource).
func deleteFilter(get func(string, ...string) string) (aclFilter, error) {
	form := templates.NewForm()
	f := parseFilter(get, &form)
	if !form.OK() {
		for k, e := range form.Errors {
			return f, web.BadRequest(k + ": " + e)
		}
	}
	if f.rt == security.ResourceAny && f.name == "" && f.principal == "" {
		return f, web.BadRequest("a removal names a resource type, a resource or a principal")
	}
	return f, nil
}

// GET /acls/delete?<filter>: the bindings the filter matches now, and the
// button that removes them.
func (h handler) confirmDelete(c *fiber.Ctx) error {
	f, err := deleteFilter(c.Query)
	if err != nil {
		return err
	}
	v := tpl.DeleteView{Filter: f.String(), Values: f.values()}
	acls, err := h.describe(c, f)
	if err != nil {
		if v.Refused = refusal(err, "Describe"); v.Refused == "" {
			return web.Unavailable(err)
		}
	}
	for _, a := range acls {
		v.Matching = append(v.Matching, row(a))
	}
	if web.WantsJSON(c) {
		return web.JSON(c, v)
	}
	return web.Render(c, fiber.StatusOK, tpl.DeletePage(web.PageFor(c, "Remove ACLs", templates.Crumb{Label: "ACLs", Href: "/acls"}, templates.Crumb{Label: "Remove"}), v))
}

// POST /acls/delete: remove every binding the filter matches (DeleteAcls).
func (h handler) deleteACLs(c *fiber.Ctx) error {
	f, err := deleteFilter(c.FormValue)
	if err != nil {
		return err
	}
	ctx, cancel := ctxOf(c)
	defer cancel()
	results, err := h.adm().DeleteACLs(ctx, f.builder())
	var removed []string
	if err == nil {
		for _, r := range results {
			if r.Err != nil {
				err = kafkaErr(r.Err, r.ErrMessage)
				break
			}
			for _, d := range r.Deleted {
				removed = append(removed, bindingOf(d.Type, d.Name, d.Pattern, d.Principal, d.Host, d.Operation, d.Permission).String())
			}
		}
	}
	detail := "removed " + itoa(len(removed))
	if len(removed) > 0 {
		detail += ": " + strings.Join(removed, "; ")
	}
	web.Audit(c, "acl.delete", f.String(), detail, err)
	switch {
	case err != nil && refusal(err, "Alter") != "":
		web.Flash(c, "bad", refusal(err, "Alter"))
	case err != nil:
		web.Flash(c, "bad", "Not removed: "+err.Error())
	case len(removed) == 0:
		web.Flash(c, "info", "No ACL matched; nothing was removed.")
	case len(removed) == 1:
		web.Flash(c, "ok", "1 ACL removed.")
	default:
		web.Flash(c, "ok", itoa(len(removed))+" ACLs removed.")
	}
	return web.SeeOther(c, "/acls")
}

func itoa(n int) string { return templates.Itoa(n) }
