package security

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The ACLs of one resource pattern as Kafka's AclAuthorizer stores them in
// its ZooKeeper node (/kafka-acl/<Type>/<name>,
// /kafka-acl-extended/prefixed/<Type>/<name>; kafka.security.authorizer.AclEntry):
//
//	{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}
//
// Names are written PascalCase, as Kafka writes them; any of Kafka's
// spellings is read. The standalone store keeps the same form.

// aclNodeVersion is the only version of the node Kafka writes and reads.
const aclNodeVersion = 1

type aclNode struct {
	Version int            `json:"version"`
	ACLs    []aclNodeEntry `json:"acls"`
}

type aclNodeEntry struct {
	Principal      string `json:"principal"`
	PermissionType string `json:"permissionType"`
	Operation      string `json:"operation"`
	Host           string `json:"host"`
}

// EncodeEntries writes a resource's entries as Kafka's ACL node.
func EncodeEntries(entries []Entry) []byte {
	n := aclNode{Version: aclNodeVersion, ACLs: make([]aclNodeEntry, len(entries))}
	for i, e := range entries {
		n.ACLs[i] = aclNodeEntry{Principal: e.Principal, PermissionType: e.Permission.String(), Operation: e.Operation.String(), Host: e.Host}
	}
	b, _ := json.Marshal(n)
	return b
}

// DecodeEntries reads Kafka's ACL node. An empty node has no entries.
func DecodeEntries(b []byte) ([]Entry, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var n aclNode
	if err := json.Unmarshal(b, &n); err != nil {
		return nil, fmt.Errorf("ACL node: %w", err)
	}
	if n.Version != aclNodeVersion {
		return nil, fmt.Errorf("ACL node: version %d, want %d", n.Version, aclNodeVersion)
	}
	out := make([]Entry, 0, len(n.ACLs))
	for _, a := range n.ACLs {
		op, err := ParseOperation(a.Operation)
		if err != nil {
			return nil, fmt.Errorf("ACL node: %w", err)
		}
		perm, err := ParsePermission(a.PermissionType)
		if err != nil || perm == PermissionAny {
			return nil, fmt.Errorf("ACL node: permission type %q", a.PermissionType)
		}
		if _, err := ParsePrincipal(a.Principal); err != nil {
			return nil, fmt.Errorf("ACL node: %w", err)
		}
		out = append(out, Entry{Principal: a.Principal, Host: a.Host, Operation: op, Permission: perm})
	}
	return out, nil
}

// Where Kafka's AclAuthorizer keeps a resource pattern's node in ZooKeeper:
// literal patterns under /kafka-acl/<Type>/<name> (the pre-2.0 layout,
// kept for them), prefixed ones under /kafka-acl-extended/prefixed/<Type>/<name>.
const (
	LiteralACLRoot  = "/kafka-acl"
	PrefixedACLRoot = "/kafka-acl-extended/prefixed"
)

// ACLPath is the node of resource pattern r (a Validate-d one: its name
// holds no '/').
func ACLPath(r Resource) string {
	root := LiteralACLRoot
	if r.Pattern == PatternPrefixed {
		root = PrefixedACLRoot
	}
	return root + "/" + r.Type.String() + "/" + r.Name
}

// ParseACLPath is the inverse of ACLPath.
func ParseACLPath(p string) (Resource, error) {
	var r Resource
	var rest string
	var ok bool
	if rest, ok = strings.CutPrefix(p, PrefixedACLRoot+"/"); ok {
		r.Pattern = PatternPrefixed
	} else if rest, ok = strings.CutPrefix(p, LiteralACLRoot+"/"); ok {
		r.Pattern = PatternLiteral
	} else {
		return r, fmt.Errorf("%q is not an ACL node", p)
	}
	typ, name, ok := strings.Cut(rest, "/")
	if !ok || name == "" || strings.Contains(name, "/") {
		return r, fmt.Errorf("%q is not an ACL node", p)
	}
	t, err := ParseResourceType(typ)
	if err != nil || t <= ResourceAny {
		return r, fmt.Errorf("%q is not an ACL node: resource type %q", p, typ)
	}
	r.Type, r.Name = t, name
	return r, nil
}

// StoredResourceTypes are the resource types with a node directory under
// each ACL root (Kafka's ZkAclStore creates one per type).
var StoredResourceTypes = []ResourceType{ResourceTopic, ResourceGroup, ResourceCluster, ResourceTransactionalID, ResourceDelegationToken, ResourceUser}
