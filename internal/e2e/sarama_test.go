package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/sluice-io/sluice/record"
)

// TestSarama produces (idempotent, zstd, acks=all) and consumes with IBM's
// sarama at its default protocol version (2.8: flexible Produce v9, Fetch
// v12, Metadata v11).
func TestSarama(t *testing.T) {
	n := startNode(t)
	cfg := sarama.NewConfig()
	cfg.ClientID = "sluice-e2e"
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Idempotent = true
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Compression = sarama.CompressionZSTD
	cfg.Producer.Retry.Max = 5
	cfg.Metadata.Retry.Backoff = 50 * time.Millisecond

	prod, err := sarama.NewSyncProducer([]string{n.Addr()}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	const total = 1000
	var msgs []*sarama.ProducerMessage
	for i := range total {
		msgs = append(msgs, &sarama.ProducerMessage{
			Topic: "sarama", Partition: 0,
			Key:     sarama.StringEncoder(fmt.Sprintf("k%d", i)),
			Value:   sarama.StringEncoder(fmt.Sprintf("sarama value %d", i)),
			Headers: []sarama.RecordHeader{{Key: []byte("h"), Value: []byte(fmt.Sprint(i))}},
		})
	}
	if err := prod.SendMessages(msgs); err != nil {
		t.Fatalf("send: %v", err)
	}
	if err := prod.Close(); err != nil {
		t.Fatal(err)
	}

	consumer, err := sarama.NewConsumer([]string{n.Addr()}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	parts, err := consumer.Partitions("sarama")
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	timeout := time.After(30 * time.Second)
	for _, p := range parts {
		pc, err := consumer.ConsumePartition("sarama", p, sarama.OffsetOldest)
		if err != nil {
			t.Fatal(err)
		}
		hw := pc.HighWaterMarkOffset()
		for int64(seen) < hw {
			select {
			case m := <-pc.Messages():
				i := seen
				if string(m.Key) != fmt.Sprintf("k%d", i) || string(m.Value) != fmt.Sprintf("sarama value %d", i) ||
					len(m.Headers) != 1 || string(m.Headers[0].Value) != fmt.Sprint(i) || m.Offset != int64(i) {
					t.Fatalf("message %d: offset %d key %q value %q headers %v", i, m.Offset, m.Key, m.Value, m.Headers)
				}
				seen++
			case err := <-pc.Errors():
				t.Fatalf("consume: %v", err)
			case <-timeout:
				t.Fatalf("consumed %d of %d", seen, total)
			}
		}
		pc.Close()
	}
	if seen != total {
		t.Fatalf("consumed %d of %d messages", seen, total)
	}
	checkCompressed(t, "sarama zstd", storedCodecs(t, n.Addr(), "sarama"), record.CompressionZstd)
}
