package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/security"
)

// ACLs: CreateAcls and DeleteAcls write the cluster's ACL store (the
// coordinator: ZooKeeper's /kafka-acl nodes with their change
// notifications, or the single node's file) and then reload this broker's
// authorizer, so that a client reads its own writes here at once; the
// other brokers follow the change notifications within moments.

// ErrSecurityDisabled is the answer of the ACL APIs on a broker without an
// authorizer (Kafka's SECURITY_DISABLED).
var ErrSecurityDisabled = &Error{Code: kerr.SecurityDisabled, Msg: "No Authorizer is configured on the broker"}

// CreateACLs stores the bindings (each validated) and returns each one's
// error, nil when stored.
func (b *Broker) CreateACLs(ctx context.Context, acls []security.ACL) []error {
	errs := make([]error, len(acls))
	if b.cfg.Authorizer == nil {
		for i := range errs {
			errs[i] = ErrSecurityDisabled
		}
		return errs
	}
	errs = cluster.CreateACLs(ctx, b.cfg.Coordinator, acls)
	b.reloadACLs(ctx)
	return errs
}

// DeleteACLs removes the bindings each filter selects and returns them per
// filter (cluster.DeleteACLs), with each filter's own error.
func (b *Broker) DeleteACLs(ctx context.Context, filters []security.Filter) ([][]cluster.DeletedACL, []error, error) {
	if b.cfg.Authorizer == nil {
		return nil, nil, ErrSecurityDisabled
	}
	deleted, filterErrs, err := cluster.DeleteACLs(ctx, b.cfg.Coordinator, filters)
	if err != nil {
		return nil, nil, err
	}
	b.reloadACLs(ctx)
	return deleted, filterErrs, nil
}

// DescribeACLs returns the bindings the filter selects, from the
// authorizer's snapshot.
func (b *Broker) DescribeACLs(f security.Filter) ([]security.ACL, error) {
	if b.cfg.Authorizer == nil {
		return nil, ErrSecurityDisabled
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return b.cfg.Authorizer.ACLs(f), nil
}

// reloadACLs has the authorizer read the store after a write here; a
// failure is logged (the watch brings the change in later).
func (b *Broker) reloadACLs(ctx context.Context) {
	if err := b.cfg.Authorizer.Reload(ctx); err != nil {
		b.log.Warn("reloading the ACLs after a change", "err", err)
	}
}
