package kafkaview

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

// NewRecord is what the produce form sends.
type NewRecord struct {
	Topic     string
	Partition int32 // -1 lets the partitioner choose (by key hash when there is a key)
	Key       []byte
	KeyNull   bool
	Value     []byte
	ValueNull bool
	Headers   []Header
}

// Produce writes one record with acks=all and returns where it landed.
func (c *Client) Produce(ctx context.Context, nr NewRecord) (Record, error) {
	r := &kgo.Record{Topic: nr.Topic}
	if !nr.KeyNull {
		r.Key = nr.Key
		if r.Key == nil {
			r.Key = []byte{}
		}
	}
	if !nr.ValueNull {
		r.Value = nr.Value
		if r.Value == nil {
			r.Value = []byte{}
		}
	}
	for _, h := range nr.Headers {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	pctx := ctx
	if nr.Partition >= 0 {
		pctx = withPartition(ctx, nr.Partition)
	}
	r.Context = pctx
	if err := c.cl.ProduceSync(pctx, r).FirstErr(); err != nil {
		return Record{}, fmt.Errorf("produce to %s: %w", nr.Topic, err)
	}
	return Record{
		Topic:     r.Topic,
		Partition: r.Partition,
		Offset:    r.Offset,
		Timestamp: r.Timestamp,
		Key:       r.Key,
		Value:     r.Value,
		KeyNull:   r.Key == nil,
		ValueNull: r.Value == nil,
		Headers:   nr.Headers,
	}, nil
}
