package security

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// Kafka's ACL model (org.apache.kafka.common.acl and .resource): a binding
// says that a principal, from a host, is allowed or denied an operation on
// the resources a pattern names. The enums carry Kafka's wire codes, so
// they go to and from kmsg unchanged; their names are Kafka's (the
// PascalCase forms ZooKeeper's ACL nodes and kafka-acls.sh use).

// ResourceType is what a resource pattern names (Kafka's ResourceType).
type ResourceType int8

const (
	ResourceUnknown         ResourceType = 0
	ResourceAny             ResourceType = 1 // filters only
	ResourceTopic           ResourceType = 2
	ResourceGroup           ResourceType = 3
	ResourceCluster         ResourceType = 4
	ResourceTransactionalID ResourceType = 5
	ResourceDelegationToken ResourceType = 6
	ResourceUser            ResourceType = 7
	numResourceTypes                     = 8
)

// ClusterName is the name of the one Cluster resource.
const ClusterName = "kafka-cluster"

// Wildcard is the resource name (of a literal pattern) and the host that
// match every name and every host.
const Wildcard = "*"

// WildcardPrincipal matches every principal of type User.
var WildcardPrincipal = Principal{Type: "User", Name: "*"}

var resourceTypeNames = [numResourceTypes]string{"Unknown", "Any", "Topic", "Group", "Cluster", "TransactionalId", "DelegationToken", "User"}

// String is Kafka's PascalCase name (the node names under /kafka-acl).
func (t ResourceType) String() string {
	if t >= 0 && int(t) < len(resourceTypeNames) {
		return resourceTypeNames[t]
	}
	return fmt.Sprintf("ResourceType(%d)", int8(t))
}

// Upper is Kafka's enum constant name (TOPIC, TRANSACTIONAL_ID), as the
// change notifications and kafka-acls.sh's listing write it.
func (t ResourceType) Upper() string { return upperName(t.String()) }

// Operation is what an ACL allows or denies (Kafka's AclOperation).
type Operation int8

const (
	OpUnknown         Operation = 0
	OpAny             Operation = 1 // filters only
	OpAll             Operation = 2
	OpRead            Operation = 3
	OpWrite           Operation = 4
	OpCreate          Operation = 5
	OpDelete          Operation = 6
	OpAlter           Operation = 7
	OpDescribe        Operation = 8
	OpClusterAction   Operation = 9
	OpDescribeConfigs Operation = 10
	OpAlterConfigs    Operation = 11
	OpIdempotentWrite Operation = 12
	OpCreateTokens    Operation = 13
	OpDescribeTokens  Operation = 14
	numOperations               = 15
)

var operationNames = [numOperations]string{"Unknown", "Any", "All", "Read", "Write", "Create", "Delete", "Alter", "Describe",
	"ClusterAction", "DescribeConfigs", "AlterConfigs", "IdempotentWrite", "CreateTokens", "DescribeTokens"}

func (o Operation) String() string {
	if o >= 0 && int(o) < len(operationNames) {
		return operationNames[o]
	}
	return fmt.Sprintf("Operation(%d)", int8(o))
}

// Upper is Kafka's enum constant name (DESCRIBE_CONFIGS).
func (o Operation) Upper() string { return upperName(o.String()) }

// PatternType is how a pattern's name matches resource names (Kafka's
// PatternType). Literal and Prefixed are stored; Any and Match are filters.
type PatternType int8

const (
	PatternUnknown  PatternType = 0
	PatternAny      PatternType = 1 // filter: literal and prefixed patterns of the same name
	PatternMatch    PatternType = 2 // filter: every pattern that matches the name
	PatternLiteral  PatternType = 3
	PatternPrefixed PatternType = 4
	numPatternTypes             = 5
)

var patternTypeNames = [numPatternTypes]string{"Unknown", "Any", "Match", "Literal", "Prefixed"}

func (p PatternType) String() string {
	if p >= 0 && int(p) < len(patternTypeNames) {
		return patternTypeNames[p]
	}
	return fmt.Sprintf("PatternType(%d)", int8(p))
}

// Upper is Kafka's enum constant name (LITERAL, PREFIXED).
func (p PatternType) Upper() string { return upperName(p.String()) }

// Permission is whether an ACL allows or denies (Kafka's AclPermissionType).
type Permission int8

const (
	PermissionUnknown Permission = 0
	PermissionAny     Permission = 1 // filters only
	Deny              Permission = 2
	Allow             Permission = 3
	numPermissions               = 4
)

var permissionNames = [numPermissions]string{"Unknown", "Any", "Deny", "Allow"}

func (p Permission) String() string {
	if p >= 0 && int(p) < len(permissionNames) {
		return permissionNames[p]
	}
	return fmt.Sprintf("Permission(%d)", int8(p))
}

// Upper is Kafka's enum constant name (ALLOW, DENY).
func (p Permission) Upper() string { return upperName(p.String()) }

// upperName turns a PascalCase name into Kafka's enum constant name:
// DescribeConfigs -> DESCRIBE_CONFIGS, TransactionalId -> TRANSACTIONAL_ID.
func upperName(s string) string {
	var b strings.Builder
	for i, r := range s {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteString(strings.ToUpper(string(r)))
	}
	return b.String()
}

// parseName finds s among names, ignoring case and underscores, so that
// each of Kafka's spellings is read: "DescribeConfigs" (ZooKeeper's ACL
// nodes), "DESCRIBE_CONFIGS" (the Java enum), "describe-configs" and
// "describeconfigs" (what people type). Unknown (index 0) is never a match.
func parseName(s string, names []string) (int, bool) {
	norm := func(x string) string {
		x = strings.ToLower(strings.TrimSpace(x))
		return strings.NewReplacer("_", "", "-", "").Replace(x)
	}
	want := norm(s)
	for i, n := range names {
		if i > 0 && norm(n) == want {
			return i, true
		}
	}
	return 0, false
}

// ParseResourceType reads a resource type name in any of Kafka's spellings.
func ParseResourceType(s string) (ResourceType, error) {
	i, ok := parseName(s, resourceTypeNames[:])
	if !ok {
		return ResourceUnknown, fmt.Errorf("unknown resource type %q", s)
	}
	return ResourceType(i), nil
}

// ParseOperation reads an operation name in any of Kafka's spellings.
func ParseOperation(s string) (Operation, error) {
	i, ok := parseName(s, operationNames[:])
	if !ok {
		return OpUnknown, fmt.Errorf("unknown operation %q", s)
	}
	return Operation(i), nil
}

// ParsePatternType reads a pattern type name in any of Kafka's spellings.
func ParsePatternType(s string) (PatternType, error) {
	i, ok := parseName(s, patternTypeNames[:])
	if !ok {
		return PatternUnknown, fmt.Errorf("unknown resource pattern type %q", s)
	}
	return PatternType(i), nil
}

// ParsePermission reads a permission type name in any of Kafka's spellings.
func ParsePermission(s string) (Permission, error) {
	i, ok := parseName(s, permissionNames[:])
	if !ok {
		return PermissionUnknown, fmt.Errorf("unknown permission type %q", s)
	}
	return Permission(i), nil
}

// ParsePrincipal reads "Type:name" (Kafka's
// SecurityUtils.parseKafkaPrincipal: the type is what comes before the
// first colon, the name may hold colons).
func ParsePrincipal(s string) (Principal, error) {
	typ, name, ok := strings.Cut(s, ":")
	if !ok || typ == "" {
		return Principal{}, fmt.Errorf("principal %q must be Type:name, e.g. User:alice", s)
	}
	return Principal{Type: typ, Name: name}, nil
}

// SupportedOperations are the operations that mean something for each
// resource type (Kafka's AclEntry.supportedOperations, with All), in the
// order Kafka lists them. kafka-acls.sh refuses others, and so do the CLI
// and the console; the broker stores what CreateAcls sends, as Kafka does.
func SupportedOperations(t ResourceType) []Operation {
	switch t {
	case ResourceTopic:
		return []Operation{OpRead, OpWrite, OpCreate, OpDescribe, OpDelete, OpAlter, OpDescribeConfigs, OpAlterConfigs, OpAll}
	case ResourceGroup:
		return []Operation{OpRead, OpDescribe, OpDelete, OpAll}
	case ResourceCluster:
		return []Operation{OpCreate, OpClusterAction, OpDescribeConfigs, OpAlterConfigs, OpIdempotentWrite, OpAlter, OpDescribe, OpAll}
	case ResourceTransactionalID:
		return []Operation{OpDescribe, OpWrite, OpAll}
	case ResourceDelegationToken:
		return []Operation{OpDescribe, OpAll}
	case ResourceUser:
		return []Operation{OpCreateTokens, OpDescribeTokens, OpAll}
	}
	return nil
}

// Supports reports whether op is among t's SupportedOperations.
func Supports(t ResourceType, op Operation) bool {
	for _, o := range SupportedOperations(t) {
		if o == op {
			return true
		}
	}
	return false
}

// Resource is a resource pattern: a type, a name and how the name matches
// (Kafka's ResourcePattern). A literal "*" matches every name of its type;
// a prefixed pattern matches the names that start with it.
type Resource struct {
	Type    ResourceType
	Name    string
	Pattern PatternType
}

func (r Resource) String() string {
	return fmt.Sprintf("ResourcePattern(resourceType=%s, name=%s, patternType=%s)", r.Type.Upper(), r.Name, r.Pattern.Upper())
}

// Entry is who may or may not do what from where (Kafka's
// AccessControlEntry). Principal is "Type:name" as stored ("User:alice",
// "User:*"); Host is an address or "*".
type Entry struct {
	Principal  string
	Host       string
	Operation  Operation
	Permission Permission
}

func (e Entry) String() string {
	return fmt.Sprintf("(principal=%s, host=%s, operation=%s, permissionType=%s)", e.Principal, e.Host, e.Operation.Upper(), e.Permission.Upper())
}

// ACL is an entry bound to a resource pattern (Kafka's AclBinding).
type ACL struct {
	Resource Resource
	Entry    Entry
}

func (a ACL) String() string { return a.Resource.String() + " " + a.Entry.String() }

// Errors of Validate and of filters, answered INVALID_REQUEST.
var ErrInvalidACL = errors.New("invalid ACL")

// Validate checks what Kafka checks of a binding before storing it
// (CreateAclsRequest, AclApis, AclAuthorizer.validateAclBinding): every
// element known and concrete (no Any or Match), a name that is not empty
// and holds no '/', "kafka-cluster" as the only Cluster name, a principal
// of the form Type:name and a host.
func (a ACL) Validate() error {
	r, e := a.Resource, a.Entry
	switch {
	case r.Type <= ResourceAny || r.Type >= numResourceTypes:
		return fmt.Errorf("%w: resource type %s", ErrInvalidACL, r.Type)
	case r.Pattern != PatternLiteral && r.Pattern != PatternPrefixed:
		return fmt.Errorf("%w: resource pattern type must be literal or prefixed, not %s", ErrInvalidACL, r.Pattern)
	case e.Operation <= OpAny || e.Operation >= numOperations:
		return fmt.Errorf("%w: operation %s", ErrInvalidACL, e.Operation)
	case e.Permission != Allow && e.Permission != Deny:
		return fmt.Errorf("%w: permission type must be allow or deny, not %s", ErrInvalidACL, e.Permission)
	case r.Name == "":
		return fmt.Errorf("%w: empty resource name", ErrInvalidACL)
	case r.Type == ResourceCluster && r.Name != ClusterName:
		return fmt.Errorf("%w: the only valid name for the CLUSTER resource is %s", ErrInvalidACL, ClusterName)
	case strings.Contains(r.Name, "/"):
		return fmt.Errorf("%w: resource name %q contains '/'", ErrInvalidACL, r.Name)
	case e.Host == "":
		return fmt.Errorf("%w: empty host (use * for every host)", ErrInvalidACL)
	}
	if _, err := ParsePrincipal(e.Principal); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidACL, err)
	}
	return nil
}

// ResourceFilter selects resource patterns (Kafka's ResourcePatternFilter).
// Type Any matches every type; a nil Name every name. Pattern Any matches
// the literal and the prefixed pattern of exactly Name; Match every pattern
// that would apply to a resource called Name (the same literal, the
// literal "*", and the prefixed patterns that Name starts with).
type ResourceFilter struct {
	Type    ResourceType
	Name    *string
	Pattern PatternType
}

// EntryFilter selects entries (Kafka's AccessControlEntryFilter): nil
// Principal and Host match every one, OpAny and PermissionAny too.
type EntryFilter struct {
	Principal  *string
	Host       *string
	Operation  Operation
	Permission Permission
}

// Filter selects ACL bindings (Kafka's AclBindingFilter).
type Filter struct {
	Resource ResourceFilter
	Entry    EntryFilter
}

// MatchAll is the filter matching every binding.
var MatchAll = Filter{
	Resource: ResourceFilter{Type: ResourceAny, Pattern: PatternAny},
	Entry:    EntryFilter{Operation: OpAny, Permission: PermissionAny},
}

// Validate refuses a filter with an unknown element (Kafka answers
// INVALID_REQUEST for it).
func (f Filter) Validate() error {
	switch {
	case f.Resource.Type <= ResourceUnknown || f.Resource.Type >= numResourceTypes:
		return fmt.Errorf("%w: filter resource type %s", ErrInvalidACL, f.Resource.Type)
	case f.Resource.Pattern <= PatternUnknown || f.Resource.Pattern >= numPatternTypes:
		return fmt.Errorf("%w: filter pattern type %s", ErrInvalidACL, f.Resource.Pattern)
	case f.Entry.Operation <= OpUnknown || f.Entry.Operation >= numOperations:
		return fmt.Errorf("%w: filter operation %s", ErrInvalidACL, f.Entry.Operation)
	case f.Entry.Permission <= PermissionUnknown || f.Entry.Permission >= numPermissions:
		return fmt.Errorf("%w: filter permission type %s", ErrInvalidACL, f.Entry.Permission)
	}
	return nil
}

// Matches is ResourcePatternFilter.matches.
func (f ResourceFilter) Matches(r Resource) bool {
	if f.Type != ResourceAny && f.Type != r.Type {
		return false
	}
	if f.Pattern != PatternAny && f.Pattern != PatternMatch && f.Pattern != r.Pattern {
		return false
	}
	if f.Name == nil {
		return true
	}
	if f.Pattern == PatternAny || f.Pattern == r.Pattern {
		return *f.Name == r.Name
	}
	switch r.Pattern { // f.Pattern is Match
	case PatternLiteral:
		return *f.Name == r.Name || r.Name == Wildcard
	case PatternPrefixed:
		return strings.HasPrefix(*f.Name, r.Name)
	}
	return false
}

// Matches is AccessControlEntryFilter.matches.
func (f EntryFilter) Matches(e Entry) bool {
	if f.Principal != nil && *f.Principal != e.Principal {
		return false
	}
	if f.Host != nil && *f.Host != e.Host {
		return false
	}
	if f.Operation != OpAny && f.Operation != e.Operation {
		return false
	}
	return f.Permission == PermissionAny || f.Permission == e.Permission
}

// Matches reports whether the filter selects a.
func (f Filter) Matches(a ACL) bool {
	return f.Resource.Matches(a.Resource) && f.Entry.Matches(a.Entry)
}

// CanonicalHost is the form a host is compared in: an IP address in Go's
// canonical text (IPv4-mapped IPv6 as IPv4), so that an ACL written with
// Java's long IPv6 form ("0:0:0:0:0:0:0:1") matches a client at ::1;
// anything else (including "*") unchanged.
func CanonicalHost(h string) string {
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Unmap().String()
	}
	return h
}

// HostOf returns the address part of a remote address "ip:port" or
// "[ipv6]:port" without allocating; it is the host ACLs are checked
// against (Kafka: the client's IP address, never a name).
func HostOf(remote string) string {
	i := strings.LastIndexByte(remote, ':')
	if i < 0 {
		return remote
	}
	h := remote[:i]
	if len(h) >= 2 && h[0] == '[' && h[len(h)-1] == ']' {
		h = h[1 : len(h)-1]
	}
	if strings.HasPrefix(h, "::ffff:") && strings.IndexByte(h[7:], ':') < 0 {
		h = h[7:] // an IPv4-mapped address, as Go's canonical form has it
	}
	return h
}

// ParseSuperUsers reads super.users: principals separated by semicolons
// (a certificate's DN holds commas), e.g. "User:admin;User:CN=broker,O=example".
func ParseSuperUsers(s string) ([]Principal, error) {
	var out []Principal
	for _, part := range strings.Split(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		p, err := ParsePrincipal(part)
		if err != nil {
			return nil, fmt.Errorf("super.users: %w", err)
		}
		out = append(out, p)
	}
	return out, nil
}

// Authorizer class names accepted in authorizer.class.name: Kafka's
// ZooKeeper-mode authorizer (and its pre-2.4 name, which Kafka itself still
// accepts as a deprecated alias) and Sluice's own name. All three are the
// Authorizer of this package.
var AuthorizerClassNames = []string{
	"kafka.security.authorizer.AclAuthorizer",
	"kafka.security.auth.SimpleAclAuthorizer",
	"sluice.security.AclAuthorizer",
}

// AuthorizerEnabled reads authorizer.class.name: empty is no authorizer
// (every request is allowed, and the ACL APIs answer SECURITY_DISABLED).
func AuthorizerEnabled(className string) (bool, error) {
	className = strings.TrimSpace(className)
	if className == "" {
		return false, nil
	}
	for _, n := range AuthorizerClassNames {
		if className == n {
			return true, nil
		}
	}
	return false, fmt.Errorf("authorizer.class.name %q is not an authorizer Sluice has: use %s", className, strings.Join(AuthorizerClassNames, " or "))
}
