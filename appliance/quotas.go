package appliance

import (
	"context"
	"time"

	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/protocol"
	"github.com/sluice-io/sluice/quota"
)

// startQuotas sets up client quota enforcement (package quota) on the
// server's config: the quotas are read once before serving, then followed
// by a goroutine that Close stops (stopQuotas).
func (a *App) startQuotas(ctx context.Context, srvCfg *protocol.Config) error {
	store, ok := a.coord.(cluster.ClientQuotaStore)
	if !ok {
		return nil
	}
	m := quota.New(quota.Config{
		Windows:    int(a.cfg.QuotaWindowNum),
		WindowSize: time.Duration(a.cfg.QuotaWindowSizeSeconds) * time.Second,

		MutationWindows:    int(a.cfg.ControllerQuotaWindowNum),
		MutationWindowSize: time.Duration(a.cfg.ControllerQuotaWindowSeconds) * time.Second,
	})
	qctx, cancel := context.WithCancel(context.Background())
	changes := a.coord.Watch(qctx) // before the read: no change is missed
	if err := m.Load(ctx, store); err != nil {
		cancel()
		return err
	}
	a.quotaCancel, a.quotaDone = cancel, make(chan struct{})
	go func() {
		defer close(a.quotaDone)
		m.Follow(qctx, store, changes, a.logger.With("component", "quotas"))
	}()
	srvCfg.Quotas, srvCfg.QuotaStore = m, store
	return nil
}

// stopQuotas ends the goroutine startQuotas started and waits for it.
func (a *App) stopQuotas() {
	if a.quotaCancel != nil {
		a.quotaCancel()
		<-a.quotaDone
	}
}
