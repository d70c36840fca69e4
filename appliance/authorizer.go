package appliance

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/security"
)

// openAuthorizer builds and starts the broker's authorizer from
// authorizer.class.name, super.users and allow.everyone.if.no.acl.found,
// over the coordinator's ACLs (ZooKeeper's /kafka-acl nodes, or the single
// node's metadata file), following their changes until Close. It returns
// nil when no authorizer is configured. Its denials are counted in
// denials' counters (sluice_broker_authorization_denials_total).
func openAuthorizer(ctx context.Context, cfg *Config, coord cluster.Coordinator, logger *slog.Logger, denials func(operation, resourceType string) prometheus.Counter) (*security.Authorizer, error) {
	enabled, err := security.AuthorizerEnabled(cfg.AuthorizerClassName)
	if err != nil || !enabled {
		return nil, err
	}
	supers, err := security.ParseSuperUsers(cfg.SuperUsers)
	if err != nil {
		return nil, err
	}
	a := security.NewAuthorizer(security.AuthorizerConfig{
		SuperUsers:                supers,
		AllowEveryoneIfNoACLFound: cfg.AllowEveryoneIfNoACLFound,
		Logger:                    logger,
		Denials:                   func(op, rt string) security.Counter { return denials(op, rt) },
	}, coord)
	if err := a.Start(ctx); err != nil {
		return nil, fmt.Errorf("authorizer: loading the ACLs: %w", err)
	}
	logger.Info("authorizer on: every request is checked against the ACLs",
		"class", cfg.AuthorizerClassName, "super_users", len(supers), "allow_everyone_if_no_acl_found", cfg.AllowEveryoneIfNoACLFound)
	return a, nil
}
