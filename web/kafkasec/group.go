// Package kafkasec is the console's section for the brokers' own
// security, for admins only: "Kafka users" (the SCRAM credentials brokers
// authenticate SASL clients with: list them with their mechanisms and
// iterations, never a secret; set a password, rotate it, remove it) and
// "ACLs" (list with filters, add with a preview in kafka-acls.sh's words,
// remove after a confirmation that shows the bindings that go). Everything
// goes over the Kafka protocol with kadm
// (Describe/AlterUserScramCredentials, Describe/Create/DeleteAcls), as the
// console's principal, so the brokers' own rules apply: when they refuse
// (an ACL denies that principal, no authorizer is configured) the page says
// so instead of showing an empty table. Every change is audited.
package kafkasec

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/web"
)

// Nav orders: beside the console's own "Users" (90) and before the
// "Audit log" (95), among the admin entries.
const (
	UsersNavOrder = 91
	ACLsNavOrder  = 92
)

// PageGroup returns the Kafka users and ACL pages.
func PageGroup() web.PageGroup {
	return web.PageGroup{
		Name: "kafkasec",
		Nav: []web.NavItem{
			{Label: "Kafka users", Path: "/kafka-users", Role: web.RoleAdmin, Order: UsersNavOrder},
			{Label: "ACLs", Path: "/acls", Role: web.RoleAdmin, Order: ACLsNavOrder},
		},
		Mount: func(r *web.Router) error {
			s := r.Server()
			h := handler{
				adm: func() *kadm.Client { return s.Kafka().Admin() },
				seeds: func() []string {
					seeds, _ := s.Kafka().Kgo().OptValue(kgo.SeedBrokers).([]string)
					return seeds
				},
			}
			r.Get("/kafka-users", web.RoleAdmin, h.users)
			r.Post("/kafka-users", web.RoleAdmin, h.setPassword)
			r.Post("/kafka-users/delete", web.RoleAdmin, h.deleteCred)
			r.Get("/acls", web.RoleAdmin, h.acls)
			r.Post("/acls", web.RoleAdmin, h.createACL)
			r.Get("/acls/delete", web.RoleAdmin, h.confirmDelete)
			r.Post("/acls/delete", web.RoleAdmin, h.deleteACLs)
			return nil
		},
	}
}

type handler struct {
	adm   func() *kadm.Client
	seeds func() []string // the console's seed brokers
}

// requestTimeout bounds one page's Kafka requests.
const requestTimeout = 15 * time.Second

func ctxOf(c *fiber.Ctx) (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.UserContext(), requestTimeout)
}

// refusal is what a page says when the brokers refuse the console's
// request, or "" for other errors (shown as errors).
func refusal(err error, need string) string {
	switch {
	case errors.Is(err, kerr.ClusterAuthorizationFailed):
		return "The brokers refused: the console's principal may not " + need + " on the cluster (CLUSTER_AUTHORIZATION_FAILED). " +
			"Add it to super.users, or grant it with: sluice acls add --allow-principal User:<console user> --operation " + strings.Fields(need)[0] + " --cluster"
	case errors.Is(err, kerr.SecurityDisabled):
		return "The brokers run without an authorizer (authorizer.class.name is not set), so there are no ACLs: every client may do everything. " +
			"Set authorizer.class.name=kafka.security.authorizer.AclAuthorizer and super.users on every broker to turn ACLs on."
	case errors.Is(err, kerr.UnsupportedVersion):
		return "The brokers do not support this request (" + err.Error() + ")."
	}
	return ""
}
