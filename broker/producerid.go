package broker

import (
	"context"
	"fmt"
)

// AllocateProducerID hands out a new producer id (InitProducerId for an
// idempotent producer without a transactional id: epoch 0). Ids come from
// blocks reserved from the coordinator, so they never repeat, across
// restarts and brokers.
func (b *Broker) AllocateProducerID(ctx context.Context) (int64, error) {
	b.pidMu.Lock()
	defer b.pidMu.Unlock()
	if b.pidNext < 0 || b.pidNext > b.pidBlock.End {
		blk, err := b.cfg.Coordinator.AllocateProducerIDs(ctx, b.cfg.BrokerID, b.cfg.ProducerIDBlockSize)
		if err != nil {
			return -1, fmt.Errorf("broker: allocate producer ids: %w", err)
		}
		b.pidBlock, b.pidNext = blk, blk.Start
	}
	id := b.pidNext
	b.pidNext++
	return id, nil
}
