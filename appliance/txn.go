package appliance

import (
	"github.com/sluice-io/sluice/broker"
	"github.com/sluice-io/sluice/txn"
)

// newTxnCoordinator builds the transaction coordinator of b from the
// transaction.* keys.
func newTxnCoordinator(a *App, b *broker.Broker) (*txn.ForBroker, error) {
	cfg := &a.cfg.Config
	return txn.NewForBroker(b, txn.NewConfig(cfg), broker.TxnStateTopicSpec{
		ReplicationFactor: cfg.TransactionStateLogReplicationFactor,
		MinISR:            cfg.TransactionStateLogMinISR,
		SegmentBytes:      cfg.TransactionStateLogSegmentBytes,
	}, a.logger)
}
