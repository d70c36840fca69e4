// Package kafkasec holds the console pages of the brokers' own security:
// the SCRAM credentials of Kafka users and the ACLs. The handlers are in
// web/kafkasec.
//
// The generated *_templ.go files are committed; `go tool templ generate`
// refreshes them.
package kafkasec

import (
	"net/url"

	"github.com/sluice-io/sluice/templates"
)

// UsersView is the Kafka users page.
type UsersView struct {
	Users []User
	// Form sets a password: user, mechanism, iterations (the password
	// fields are never sent back).
	Form templates.Form
	// Shown is the password just generated, shown on this answer only.
	Shown *ShownPassword
	// Refused says why the brokers would not list the users (the
	// console's principal lacks Describe on the cluster, ...); empty when
	// they did.
	Refused string
}

// User is a Kafka user and its SCRAM credentials (never the secrets).
type User struct {
	Name  string
	Creds []Cred
	Err   string // the broker's error describing this user, if any
}

// Cred is one SCRAM credential of a user.
type Cred struct {
	Mechanism  string // SCRAM-SHA-256, SCRAM-SHA-512
	Iterations int32
}

// ShownPassword is a password the console generated, shown once.
type ShownPassword struct {
	User, Mechanism, Password string
}

// ACLsView is the ACLs page: the bindings the filter selects and the form
// that adds one.
type ACLsView struct {
	// Filter is the list's filter: principal, type, name, pattern.
	Filter   templates.Form
	Filtered bool // some filter is set
	ACLs     []ACL
	// RemoveMatching is the confirmation page of removing every binding
	// the filter selects ("" without a filter).
	RemoveMatching string
	// Form adds a binding: type, name, pattern, principal, host,
	// operation, permission.
	Form    templates.Form
	Preview *Preview
	Refused string
	// NoAuthorizer: the brokers run without authorizer.class.name, so
	// there are no ACLs to list or add.
	NoAuthorizer bool
}

// ACL is one binding as the list shows it.
type ACL struct {
	Type, Name, Pattern                    string // Topic, orders, Literal
	Principal, Host, Operation, Permission string // User:alice, *, Read, Allow
	Kafka                                  string // kafka-acls.sh's words: ResourcePattern(...) (principal=...)
	RemoveURL                              string // its removal's confirmation page
}

// Preview is what a binding to add grants, before it is added.
type Preview struct {
	// Kafka is kafka-acls.sh's "Adding ACLs for resource ..." text.
	Kafka string
	// Command is the kafka-acls.sh command that adds the same binding.
	Command string
	// Says is the binding in a sentence, Implied the operations an Allow
	// also grants (Describe for Read, ...).
	Says    string
	Implied []string
}

// DeleteView is the confirmation of a removal: the filter and the bindings
// it matches now.
type DeleteView struct {
	Filter   string     // the filter in kafka-acls.sh's words
	Values   url.Values // the filter's fields, posted back on confirmation
	Matching []ACL
	Refused  string
}

// Fields are the filter's form fields in a stable order, for hidden inputs.
func (v DeleteView) Fields() []string {
	return []string{"type", "name", "pattern", "principal", "host", "operation", "permission"}
}

func opt(value, label string) templates.Option { return templates.Option{Value: value, Label: label} }

func mechanismOptions() []templates.Option {
	return []templates.Option{opt("SCRAM-SHA-512", "SCRAM-SHA-512"), opt("SCRAM-SHA-256", "SCRAM-SHA-256")}
}

func typeOptions(any bool) []templates.Option {
	var o []templates.Option
	if any {
		o = append(o, opt("", "any type"))
	}
	return append(o, opt("Topic", "Topic"), opt("Group", "Group (consumer group)"),
		opt("Cluster", "Cluster"), opt("TransactionalId", "TransactionalId"))
}

func patternFilterOptions() []templates.Option {
	return []templates.Option{opt("", "match (every ACL that applies to the name)"), opt("Any", "any (the literal and prefixed pattern of the name)"),
		opt("Literal", "literal"), opt("Prefixed", "prefixed")}
}

func patternOptions() []templates.Option {
	return []templates.Option{opt("Literal", "Literal — this name (* for every one)"), opt("Prefixed", "Prefixed — every name starting with it")}
}

func operationOptions() []templates.Option {
	var o []templates.Option
	for _, s := range []string{"Read", "Write", "Create", "Delete", "Alter", "Describe", "DescribeConfigs", "AlterConfigs", "ClusterAction", "IdempotentWrite", "All"} {
		o = append(o, opt(s, s))
	}
	return o
}

func permissionOptions() []templates.Option {
	return []templates.Option{opt("Allow", "Allow"), opt("Deny", "Deny (wins over every Allow)")}
}
