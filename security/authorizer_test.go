package security

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected decisions of testdata/*.txt")

// TestAuthorizeGolden runs testdata/authorize.txt: blocks of
//
//	config super=User:admin;User:ops allow-everyone=true   (optional)
//	acl <Type> <literal|prefixed> <name> <principal> <host> <Allow|Deny> <Operation>
//	check <principal> <host> <Operation> <Type> <name> => allow|deny
//	bytype <principal> <host> <Operation> <Type> => allow|deny
//
// separated by "reset". With -rewrite the decisions after "=>" are
// rewritten from what the authorizer says; otherwise they must match.
func TestAuthorizeGolden(t *testing.T) {
	const path = "testdata/authorize.txt"
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out strings.Builder
	var cfg AuthorizerConfig
	var acls []ACL
	var a *Authorizer
	authorizer := func() *Authorizer {
		if a == nil {
			a = NewAuthorizer(cfg, nil)
			a.SetACLs(acls)
		}
		return a
	}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			out.WriteString(line + "\n")
			continue
		}
		fail := func(format string, args ...any) { t.Fatalf("%s:%d: %s", path, n, fmt.Sprintf(format, args...)) }
		switch fields[0] {
		case "reset":
			cfg, acls, a = AuthorizerConfig{}, nil, nil
		case "config":
			for _, kv := range fields[1:] {
				k, v, _ := strings.Cut(kv, "=")
				switch k {
				case "super":
					for _, s := range strings.Split(v, ";") {
						p, err := ParsePrincipal(s)
						if err != nil {
							fail("%v", err)
						}
						cfg.SuperUsers = append(cfg.SuperUsers, p)
					}
				case "allow-everyone":
					cfg.AllowEveryoneIfNoACLFound = v == "true"
				default:
					fail("unknown config %q", k)
				}
			}
			a = nil
		case "acl":
			if len(fields) != 8 {
				fail("acl wants 7 fields")
			}
			rt, err1 := ParseResourceType(fields[1])
			pt, err2 := ParsePatternType(fields[2])
			perm, err3 := ParsePermission(fields[6])
			op, err4 := ParseOperation(fields[7])
			for _, err := range []error{err1, err2, err3, err4} {
				if err != nil {
					fail("%v", err)
				}
			}
			acl := ACL{Resource{rt, fields[3], pt}, Entry{Principal: fields[4], Host: fields[5], Operation: op, Permission: perm}}
			if err := acl.Validate(); err != nil {
				fail("%v", err)
			}
			acls = append(acls, acl)
			a = nil
		case "check", "bytype":
			lhs, want, ok := strings.Cut(line, "=>")
			if !ok {
				want = ""
			}
			want = strings.TrimSpace(want)
			args := strings.Fields(lhs)[1:]
			p, err := ParsePrincipal(args[0])
			if err != nil {
				fail("%v", err)
			}
			op, err := ParseOperation(args[2])
			if err != nil {
				fail("%v", err)
			}
			rt, err := ParseResourceType(args[3])
			if err != nil {
				fail("%v", err)
			}
			var ok2 bool
			if fields[0] == "check" {
				if len(args) != 5 {
					fail("check wants principal host operation type name")
				}
				ok2 = authorizer().Authorize(p, args[1], op, rt, args[4])
			} else {
				ok2 = authorizer().AuthorizeByResourceType(p, args[1], op, rt)
			}
			got := "deny"
			if ok2 {
				got = "allow"
			}
			if !*rewrite && got != want {
				t.Errorf("%s:%d: %s: got %s, want %s", path, n, strings.TrimSpace(lhs), got, want)
			}
			out.WriteString(strings.TrimRight(lhs, " ") + " => " + got + "\n")
			continue
		default:
			fail("unknown directive %q", fields[0])
		}
		out.WriteString(line + "\n")
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestAuthorizedOperations(t *testing.T) {
	a := NewAuthorizer(AuthorizerConfig{}, nil)
	a.SetACLs([]ACL{
		{Resource{ResourceTopic, "orders", PatternLiteral}, Entry{"User:alice", "*", OpRead, Allow}},
		{Resource{ResourceTopic, "orders", PatternLiteral}, Entry{"User:alice", "*", OpAlterConfigs, Allow}},
	})
	alice := Principal{"User", "alice"}
	got := a.AuthorizedOperations(alice, "10.0.0.1", ResourceTopic, "orders")
	want := int32(1<<OpRead | 1<<OpDescribe | 1<<OpAlterConfigs | 1<<OpDescribeConfigs)
	if got != want {
		t.Fatalf("AuthorizedOperations = %b, want %b", got, want)
	}
}

func TestFilters(t *testing.T) {
	s := func(v string) *string { return &v }
	lit := func(n string) Resource { return Resource{ResourceTopic, n, PatternLiteral} }
	pre := func(n string) Resource { return Resource{ResourceTopic, n, PatternPrefixed} }
	cases := []struct {
		f    ResourceFilter
		r    Resource
		want bool
	}{
		{ResourceFilter{ResourceAny, nil, PatternAny}, lit("a"), true},
		{ResourceFilter{ResourceGroup, nil, PatternAny}, lit("a"), false},
		{ResourceFilter{ResourceTopic, s("a"), PatternAny}, lit("a"), true},
		{ResourceFilter{ResourceTopic, s("a"), PatternAny}, pre("a"), true},
		{ResourceFilter{ResourceTopic, s("ab"), PatternAny}, pre("a"), false},
		{ResourceFilter{ResourceTopic, s("a"), PatternLiteral}, pre("a"), false},
		{ResourceFilter{ResourceTopic, s("a"), PatternPrefixed}, pre("a"), true},
		{ResourceFilter{ResourceTopic, s("abc"), PatternMatch}, pre("ab"), true},
		{ResourceFilter{ResourceTopic, s("abc"), PatternMatch}, pre("abcd"), false},
		{ResourceFilter{ResourceTopic, s("abc"), PatternMatch}, lit("*"), true},
		{ResourceFilter{ResourceTopic, s("abc"), PatternMatch}, lit("abc"), true},
		{ResourceFilter{ResourceTopic, s("abc"), PatternMatch}, lit("ab"), false},
		{ResourceFilter{ResourceTopic, nil, PatternMatch}, pre("x"), true},
		{ResourceFilter{ResourceTopic, s("*"), PatternLiteral}, lit("*"), true},
		{ResourceFilter{ResourceTopic, s("x"), PatternLiteral}, lit("*"), false},
	}
	for _, c := range cases {
		if got := c.f.Matches(c.r); got != c.want {
			name := "<nil>"
			if c.f.Name != nil {
				name = *c.f.Name
			}
			t.Errorf("filter %s/%s/%s matches %v = %v, want %v", c.f.Type, name, c.f.Pattern, c.r, got, c.want)
		}
	}
	e := Entry{"User:alice", "10.0.0.1", OpRead, Allow}
	for _, c := range []struct {
		f    EntryFilter
		want bool
	}{
		{EntryFilter{nil, nil, OpAny, PermissionAny}, true},
		{EntryFilter{s("User:alice"), nil, OpAny, PermissionAny}, true},
		{EntryFilter{s("User:bob"), nil, OpAny, PermissionAny}, false},
		{EntryFilter{nil, s("*"), OpAny, PermissionAny}, false},
		{EntryFilter{nil, s("10.0.0.1"), OpRead, Allow}, true},
		{EntryFilter{nil, nil, OpAll, PermissionAny}, false},
		{EntryFilter{nil, nil, OpAny, Deny}, false},
	} {
		if got := c.f.Matches(e); got != c.want {
			t.Errorf("%+v matches %v = %v, want %v", c.f, e, got, c.want)
		}
	}
}

func TestValidate(t *testing.T) {
	ok := ACL{Resource{ResourceTopic, "t", PatternLiteral}, Entry{"User:a", "*", OpRead, Allow}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := []func(*ACL){
		func(a *ACL) { a.Resource.Type = ResourceAny },
		func(a *ACL) { a.Resource.Pattern = PatternMatch },
		func(a *ACL) { a.Resource.Pattern = PatternAny },
		func(a *ACL) { a.Resource.Name = "" },
		func(a *ACL) { a.Resource.Name = "a/b" },
		func(a *ACL) { a.Resource.Type, a.Resource.Name = ResourceCluster, "other" },
		func(a *ACL) { a.Entry.Operation = OpAny },
		func(a *ACL) { a.Entry.Operation = 99 },
		func(a *ACL) { a.Entry.Permission = PermissionAny },
		func(a *ACL) { a.Entry.Principal = "alice" },
		func(a *ACL) { a.Entry.Host = "" },
	}
	for i, mod := range bad {
		a := ok
		mod(&a)
		if err := a.Validate(); err == nil {
			t.Errorf("case %d: %v validated", i, a)
		}
	}
}

func TestNames(t *testing.T) {
	for _, s := range []string{"DescribeConfigs", "DESCRIBE_CONFIGS", "describe-configs", "describeconfigs"} {
		if op, err := ParseOperation(s); err != nil || op != OpDescribeConfigs {
			t.Errorf("ParseOperation(%q) = %v, %v", s, op, err)
		}
	}
	if OpDescribeConfigs.Upper() != "DESCRIBE_CONFIGS" || ResourceTransactionalID.Upper() != "TRANSACTIONAL_ID" || ResourceTransactionalID.String() != "TransactionalId" {
		t.Error("names")
	}
	if _, err := ParseOperation("Unknown"); err == nil {
		t.Error("Unknown parsed")
	}
	for _, c := range [][2]string{{"10.0.0.1:9092", "10.0.0.1"}, {"[::1]:5", "::1"}, {"[::ffff:10.1.2.3]:5", "10.1.2.3"}, {"host", "host"}} {
		if got := HostOf(c[0]); got != c[1] {
			t.Errorf("HostOf(%q) = %q, want %q", c[0], got, c[1])
		}
	}
	if CanonicalHost("0:0:0:0:0:0:0:1") != "::1" || CanonicalHost("*") != "*" {
		t.Error("CanonicalHost")
	}
}

func TestEntriesJSON(t *testing.T) {
	in := []Entry{{"User:alice", "*", OpDescribeConfigs, Allow}, {"User:*", "10.0.0.1", OpAll, Deny}}
	b := EncodeEntries(in)
	want := `{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"DescribeConfigs","host":"*"},{"principal":"User:*","permissionType":"Deny","operation":"All","host":"10.0.0.1"}]}`
	if string(b) != want {
		t.Fatalf("EncodeEntries = %s\nwant %s", b, want)
	}
	out, err := DecodeEntries(b)
	if err != nil || len(out) != 2 || out[0] != in[0] || out[1] != in[1] {
		t.Fatalf("DecodeEntries = %v, %v", out, err)
	}
	// Kafka's reader takes the enum names too.
	if out, err := DecodeEntries([]byte(`{"version":1,"acls":[{"principal":"User:a","permissionType":"ALLOW","operation":"IDEMPOTENT_WRITE","host":"*"}]}`)); err != nil || out[0].Operation != OpIdempotentWrite {
		t.Fatalf("enum names: %v %v", out, err)
	}
	for _, bad := range []string{`{"version":2,"acls":[]}`, `{`, `{"version":1,"acls":[{"principal":"a","permissionType":"Allow","operation":"Read","host":"*"}]}`,
		`{"version":1,"acls":[{"principal":"User:a","permissionType":"Any","operation":"Read","host":"*"}]}`} {
		if _, err := DecodeEntries([]byte(bad)); err == nil {
			t.Errorf("DecodeEntries(%s) succeeded", bad)
		}
	}
}

// TestSwap: a reload replaces the decisions at once.
func TestSwap(t *testing.T) {
	src := &memSource{}
	a := NewAuthorizer(AuthorizerConfig{}, src)
	alice := Principal{"User", "alice"}
	if err := a.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if a.Authorize(alice, "1.2.3.4", OpRead, ResourceTopic, "t") {
		t.Fatal("allowed without ACLs")
	}
	src.acls = []ACL{{Resource{ResourceTopic, "t", PatternLiteral}, Entry{"User:alice", "*", OpRead, Allow}}}
	if err := a.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !a.Authorize(alice, "1.2.3.4", OpRead, ResourceTopic, "t") {
		t.Fatal("denied after the reload")
	}
}

type memSource struct{ acls []ACL }

func (m *memSource) ACLs(context.Context) ([]ACL, error) { return m.acls, nil }
func (m *memSource) WatchACLs(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{})
	go func() { <-ctx.Done(); close(ch) }()
	return ch
}

// BenchmarkAuthorize is the check Produce and Fetch make per topic, with a
// few hundred ACLs in force and the denial counters on (as a broker runs
// it): it must not allocate.
func BenchmarkAuthorize(b *testing.B) {
	var acls []ACL
	for i := range 100 {
		u := fmt.Sprintf("User:user%d", i)
		acls = append(acls,
			ACL{Resource{ResourceTopic, fmt.Sprintf("team%d-", i), PatternPrefixed}, Entry{u, "*", OpRead, Allow}},
			ACL{Resource{ResourceTopic, fmt.Sprintf("topic%d", i), PatternLiteral}, Entry{u, "*", OpWrite, Allow}},
			ACL{Resource{ResourceGroup, fmt.Sprintf("team%d-", i), PatternPrefixed}, Entry{u, "*", OpRead, Allow}})
	}
	acls = append(acls, ACL{Resource{ResourceTopic, "*", PatternLiteral}, Entry{"User:*", "10.9.9.9", OpAll, Deny}})
	var d countingDenials
	a := NewAuthorizer(AuthorizerConfig{Denials: d.resolve}, nil)
	a.SetACLs(acls)
	p := Principal{"User", "user42"}
	host := HostOf("10.0.0.7:51234")
	if !a.Authorize(p, host, OpWrite, ResourceTopic, "topic42") || !a.Authorize(p, host, OpRead, ResourceTopic, "team42-orders") {
		b.Fatal("denied")
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if i&1 == 0 {
			a.Authorize(p, host, OpWrite, ResourceTopic, "topic42")
		} else {
			a.Authorize(p, host, OpRead, ResourceTopic, "team42-orders")
		}
	}
}

func TestAuthorizeDoesNotAllocate(t *testing.T) {
	a := NewAuthorizer(AuthorizerConfig{SuperUsers: []Principal{{"User", "admin"}}}, nil)
	a.SetACLs([]ACL{
		{Resource{ResourceTopic, "orders-", PatternPrefixed}, Entry{"User:alice", "*", OpRead, Allow}},
		{Resource{ResourceTopic, "*", PatternLiteral}, Entry{"User:*", "10.0.0.9", OpRead, Deny}},
	})
	p := Principal{"User", "alice"}
	host := HostOf("10.0.0.1:4000")
	if n := testing.AllocsPerRun(1000, func() { a.Authorize(p, host, OpDescribe, ResourceTopic, "orders-eu") }); n != 0 {
		t.Fatalf("Authorize allocates %v times", n)
	}
}

func TestConfigValues(t *testing.T) {
	ps, err := ParseSuperUsers(" User:admin ; User:CN=broker,O=example;")
	if err != nil || len(ps) != 2 || ps[1] != (Principal{"User", "CN=broker,O=example"}) {
		t.Fatalf("ParseSuperUsers = %v, %v", ps, err)
	}
	if _, err := ParseSuperUsers("admin"); err == nil {
		t.Fatal("super.users without a type accepted")
	}
	for _, n := range AuthorizerClassNames {
		if ok, err := AuthorizerEnabled(n); !ok || err != nil {
			t.Errorf("%s: %v %v", n, ok, err)
		}
	}
	if ok, err := AuthorizerEnabled(""); ok || err != nil {
		t.Error("empty")
	}
	if _, err := AuthorizerEnabled("org.apache.kafka.metadata.authorizer.StandardAuthorizer"); err == nil {
		t.Error("KRaft's authorizer accepted")
	}
}

// countingDenials is a Denials resolver whose counters are plain ints,
// keyed "Operation/ResourceType".
type countingDenials struct {
	mu sync.Mutex
	n  map[string]*countInt
}

type countInt struct {
	mu sync.Mutex
	v  int
}

func (c *countInt) Inc() { c.mu.Lock(); c.v++; c.mu.Unlock() }

func (d *countingDenials) resolve(op, rt string) Counter {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.n == nil {
		d.n = map[string]*countInt{}
	}
	k := op + "/" + rt
	if d.n[k] == nil {
		d.n[k] = &countInt{}
	}
	return d.n[k]
}

func (d *countingDenials) get(k string) int {
	d.mu.Lock()
	c := d.n[k]
	d.mu.Unlock()
	if c == nil {
		return -1
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.v
}

// TestDenialsCounted: every pair of a supported operation and its
// resource type has its counter from the start (at zero); Authorize and
// AuthorizeByResourceType count a denial of theirs, Permits and
// AuthorizedOperations count nothing, an allowed check counts nothing;
// a denial is logged at INFO with the principal, operation, host and
// resource, at most DenialLogPerSecond lines a second, the next line
// saying how many were left out.
func TestDenialsCounted(t *testing.T) {
	var d countingDenials
	var logBuf bytes.Buffer
	var logMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &logBuf, mu: &logMu}, nil))
	a := NewAuthorizer(AuthorizerConfig{Denials: d.resolve, Logger: logger}, nil)
	a.SetACLs([]ACL{{Resource{ResourceTopic, "orders", PatternLiteral}, Entry{"User:alice", "*", OpRead, Allow}}})
	for _, k := range []string{"Read/Topic", "Write/Topic", "Describe/Group", "ClusterAction/Cluster", "Write/TransactionalId"} {
		if got := d.get(k); got != 0 {
			t.Fatalf("%s: %d before any denial, want a counter at 0", k, got)
		}
	}
	if d.get("All/Topic") != -1 || d.get("Read/Cluster") != -1 {
		t.Fatal("counters resolved for All or for an operation the resource type does not support")
	}
	alice, bob := Principal{"User", "alice"}, Principal{"User", "bob"}
	if !a.Authorize(alice, "10.0.0.1", OpRead, ResourceTopic, "orders") || !a.Authorize(alice, "10.0.0.1", OpDescribe, ResourceTopic, "orders") {
		t.Fatal("alice denied")
	}
	if a.Authorize(bob, "10.0.0.2", OpWrite, ResourceTopic, "orders") {
		t.Fatal("bob allowed")
	}
	if a.Permits(bob, "10.0.0.2", OpRead, ResourceTopic, "orders") || a.AuthorizedOperations(bob, "10.0.0.2", ResourceTopic, "orders") != 0 {
		t.Fatal("bob permitted")
	}
	if a.AuthorizeByResourceType(bob, "10.0.0.2", OpWrite, ResourceTopic) {
		t.Fatal("bob may write some topic")
	}
	if got := d.get("Write/Topic"); got != 2 {
		t.Fatalf("Write/Topic denials %d, want 2 (Authorize and AuthorizeByResourceType)", got)
	}
	if got := d.get("Read/Topic"); got != 0 {
		t.Fatalf("Read/Topic denials %d, want 0 (only Permits said no)", got)
	}
	if got := d.get("Describe/Topic"); got != 0 {
		t.Fatalf("Describe/Topic denials %d, want 0", got)
	}
	logMu.Lock()
	out := logBuf.String()
	logMu.Unlock()
	for _, want := range []string{`level=INFO msg="authorization denied" component=authorizer principal=User:bob operation=Write host=10.0.0.2 resource=Topic:orders`,
		`resource="any Topic"`} {
		if !strings.Contains(out, want) {
			t.Fatalf("log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "operation=Read") || strings.Contains(out, "alice") {
		t.Fatalf("a check that refused nothing was logged:\n%s", out)
	}

	// A flood: at most DenialLogPerSecond lines in a second.
	var l denialLog
	now := time.Unix(1000, 0)
	for i := range DenialLogPerSecond {
		if n, ok := l.allow(now.Add(time.Duration(i) * time.Millisecond)); !ok || n != 0 {
			t.Fatalf("line %d: %d %v", i, n, ok)
		}
	}
	for range 5 {
		if _, ok := l.allow(now.Add(500 * time.Millisecond)); ok {
			t.Fatal("a line beyond the second's budget was let through")
		}
	}
	if n, ok := l.allow(now.Add(time.Second)); !ok || n != 5 {
		t.Fatalf("next second: suppressed %d, ok %v; want 5, true", n, ok)
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestAllowedPathDoesNotAllocateWithDenials: with the denial counters on,
// an allowed check still allocates nothing.
func TestAllowedPathDoesNotAllocateWithDenials(t *testing.T) {
	var d countingDenials
	a := NewAuthorizer(AuthorizerConfig{Denials: d.resolve}, nil)
	a.SetACLs([]ACL{{Resource{ResourceTopic, "orders-", PatternPrefixed}, Entry{"User:alice", "*", OpWrite, Allow}}})
	alice := Principal{"User", "alice"}
	if n := testing.AllocsPerRun(1000, func() { a.Authorize(alice, "10.0.0.1", OpWrite, ResourceTopic, "orders-eu") }); n != 0 {
		t.Fatalf("allowed check: %v allocs", n)
	}
	if d.get("Write/Topic") != 0 {
		t.Fatal("an allowed check was counted")
	}
}
