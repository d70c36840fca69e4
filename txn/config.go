package txn

import (
	"errors"
	"time"

	"github.com/sluice-io/sluice/config"
)

// Config are the coordinator's settings (the transaction.* keys).
type Config struct {
	NumPartitions        int32         // transaction.state.log.num.partitions
	OffsetsPartitions    int32         // offsets.topic.num.partitions (AddOffsetsToTxn)
	LoadBufferSize       int32         // transaction.state.log.load.buffer.size
	MaxTimeout           time.Duration // transaction.max.timeout.ms
	IDExpiration         time.Duration // transactional.id.expiration.ms
	AbortTimedOutEvery   time.Duration // transaction.abort.timed.out.transaction.cleanup.interval.ms
	RemoveExpiredEvery   time.Duration // transaction.remove.expired.transaction.cleanup.interval.ms
	WriteTimeout         time.Duration // one append to __transaction_state (acks=all)
	MarkerRetryBackoff   time.Duration // first wait before markers are sent again
	MarkerRetryBackoffMx time.Duration // longest wait between marker attempts
}

// NewConfig takes the coordinator's settings from the broker's config.
func NewConfig(c *config.Config) Config {
	return Config{
		NumPartitions:      c.TransactionStateLogNumPartitions,
		OffsetsPartitions:  c.OffsetsTopicNumPartitions,
		LoadBufferSize:     c.TransactionStateLogLoadBufferSize,
		MaxTimeout:         c.TransactionMaxTimeout,
		IDExpiration:       c.TransactionalIDExpiration,
		AbortTimedOutEvery: c.TransactionAbortTimedOutInterval,
		RemoveExpiredEvery: c.TransactionRemoveExpiredInterval,
	}.withDefaults()
}

// withDefaults fills what is zero with Kafka's defaults.
func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if c.NumPartitions <= 0 {
		c.NumPartitions = 50
	}
	if c.OffsetsPartitions <= 0 {
		c.OffsetsPartitions = 50
	}
	if c.LoadBufferSize <= 0 {
		c.LoadBufferSize = 5 << 20
	}
	def(&c.MaxTimeout, 15*time.Minute)
	def(&c.IDExpiration, 7*24*time.Hour)
	def(&c.AbortTimedOutEvery, 10*time.Second)
	def(&c.RemoveExpiredEvery, time.Hour)
	def(&c.WriteTimeout, 30*time.Second)
	def(&c.MarkerRetryBackoff, 50*time.Millisecond)
	def(&c.MarkerRetryBackoffMx, time.Second)
	return c
}

// Validate checks c after defaults.
func (c Config) Validate() error {
	if c.NumPartitions <= 0 || c.OffsetsPartitions <= 0 {
		return errors.New("txn: partition counts must be positive")
	}
	return nil
}
