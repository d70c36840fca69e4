// Package quotas holds the console's client quotas page. The handlers are
// in web/quotas.
//
// The generated *_templ.go files are committed; `go tool templ generate`
// refreshes them.
package quotas

import (
	"time"

	"github.com/sluice-io/sluice/templates"
)

// View is the quotas page: every quota entity and the form that sets one.
type View struct {
	Entities []Entity
	// Form sets quotas: entity (a kind), user, client_id,
	// producer_byte_rate, consumer_byte_rate, request_percentage.
	Form templates.Form
	// Refused says why the brokers would not describe the quotas; empty
	// when they did.
	Refused string
	// Throttle is the throttling this console's own broker measured, per
	// client; ThrottleKnown is false when the console cannot read it (no
	// broker in this process).
	Throttle      []Throttled
	ThrottleKnown bool
}

// Entity is one quota entity and its quotas, in words.
type Entity struct {
	// Label is the entity in words: `user "alice"`, "default client id".
	Label string
	// User and ClientID are its components ("" when absent); the
	// *Default flags mark a default component. They post back to delete.
	User, ClientID             string
	UserDefault, ClientDefault bool
	HasUser, HasClient         bool
	Quotas                     []Quota
}

// Quota is one quota of an entity.
type Quota struct {
	Key   string // Kafka's name, producer_byte_rate
	Label string // in words, "Produce rate"
	Value string // with its unit, "1 MiB/s (1,048,576 bytes/s)"
}

// Throttled is one client's throttle time on this console's broker, since
// it started (sluice_broker_client_throttle_seconds_total).
type Throttled struct {
	User, ClientID, QuotaType string
	Seconds                   float64
	// Recent is the time throttled during the last Window (the time since
	// the console's previous reading); Window 0 when there is none yet.
	Recent float64
	Window time.Duration
}

// Preview is the preview of setting an entity's quotas: each quota the
// form sets, its value now and after, as the brokers validated them
// (AlterClientQuotas with validate_only).
type Preview struct {
	Entity string // the entity in words
	Rows   []Change
	// Form is the set form's values, posted again with apply=1.
	Form    templates.Form
	Refused string // the brokers' refusal of the validation, or ""
	Err     string // why the apply failed, or ""
}

// Change is one quota a set changes.
type Change struct {
	Key, Label string
	Old        string // with its unit; "" when the entity has none
	New        string // with its unit
	// Was is the value now as Kafka has it ("" when none), posted back
	// so that a quota changed since the preview is not overwritten.
	Was string
}
