package securitytest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluice-io/sluice/internal/testutil"
)

// saramaSCRAM is sarama's SCRAM client over franz-go's SCRAM-SHA-256
// client session: Step("") gives the client-first message, then each
// server message is the session's challenge; the server-final message's
// signature is verified before Done.
type saramaSCRAM struct {
	sess  sasl.Session
	first []byte // the client-first message until Step sends it
	done  bool
}

func (c *saramaSCRAM) Begin(user, password, authzID string) error {
	sess, first, err := scram.Auth{Zid: authzID, User: user, Pass: password}.AsSha256Mechanism().Authenticate(context.Background(), "")
	if err != nil {
		return err
	}
	c.sess, c.first = sess, first
	return nil
}

func (c *saramaSCRAM) Step(challenge string) (string, error) {
	if c.first != nil {
		first := c.first
		c.first = nil
		return string(first), nil
	}
	done, msg, err := c.sess.Challenge([]byte(challenge))
	c.done = done
	return string(msg), err
}

func (c *saramaSCRAM) Done() bool { return c.done }

// saramaConfig is a sarama configuration for SASL_PLAINTEXT with
// SCRAM-SHA-256 as user.
func saramaConfig(user, password string) *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.ClientID = "sluice-securitytest"
	cfg.Net.SASL.Enable = true
	cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA256
	cfg.Net.SASL.User, cfg.Net.SASL.Password = user, password
	cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &saramaSCRAM{} }
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Metadata.Retry.Backoff = 50 * time.Millisecond
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	return cfg
}

// saramaHandler marks every record it is given and, once it has n, commits
// the group's offsets and closes full.
type saramaHandler struct {
	n    int
	mu   sync.Mutex
	got  []string
	full chan struct{}
}

func (h *saramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *saramaHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		select {
		case m, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			sess.MarkMessage(m, "")
			h.mu.Lock()
			h.got = append(h.got, string(m.Value))
			if len(h.got) == h.n {
				sess.Commit()
				close(h.full)
			}
			h.mu.Unlock()
		case <-sess.Context().Done():
			return nil
		}
	}
}

// TestSaramaSASLPlaintext: sarama (SaslHandshake v1 and SaslAuthenticate)
// produces with a SyncProducer and consumes in a ConsumerGroup over
// SASL_PLAINTEXT with SCRAM-SHA-256, committing the group's offsets; with a
// wrong password it is refused with SASL_AUTHENTICATION_FAILED and nothing
// is written.
func TestSaramaSASLPlaintext(t *testing.T) {
	testutil.Heavy(t, "sarama over SASL")
	s := startSecured(t)
	ctx := ctxFor(t, 90*time.Second)
	adm := kadm.NewClient(client(t, s.saslPlain, kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism())))
	addrs := []string{s.saslPlain}

	t.Run("SCRAM-SHA-256", func(t *testing.T) {
		const topic, group, n = "sarama-sasl", "sarama-alice", 40
		if _, err := adm.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
		cfg := saramaConfig("alice", "alice-secret")
		prod, err := sarama.NewSyncProducer(addrs, cfg)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if _, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(fmt.Sprint("sarama-", i))}); err != nil {
				t.Fatalf("send %d: %v", i, err)
			}
		}
		if err := prod.Close(); err != nil {
			t.Fatal(err)
		}

		cg, err := sarama.NewConsumerGroup(addrs, group, cfg)
		if err != nil {
			t.Fatal(err)
		}
		h := &saramaHandler{n: n, full: make(chan struct{})}
		cctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Add(1)
		var consumeErr error
		go func() {
			defer wg.Done()
			for cctx.Err() == nil {
				if err := cg.Consume(cctx, []string{topic}, h); err != nil && !errors.Is(err, sarama.ErrClosedConsumerGroup) {
					consumeErr = err
					return
				}
			}
		}()
		select {
		case <-h.full:
		case <-ctx.Done():
		}
		cancel()
		wg.Wait()
		if err := cg.Close(); err != nil {
			t.Fatal(err)
		}
		if consumeErr != nil {
			t.Fatalf("consume: %v", consumeErr)
		}
		h.mu.Lock()
		got := append([]string(nil), h.got...)
		h.mu.Unlock()
		seen := map[string]bool{}
		for _, v := range got {
			seen[v] = true
		}
		for i := range n {
			if !seen[fmt.Sprint("sarama-", i)] {
				t.Fatalf("record sarama-%d not consumed (got %d records: %v)", i, len(got), got)
			}
		}
		if len(got) != n {
			t.Fatalf("consumed %d records, want %d: %v", len(got), n, got)
		}
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		var committed int64
		offs.Each(func(o kadm.OffsetResponse) { committed += o.At })
		if committed != n {
			t.Fatalf("the group committed %d records' offsets, want %d: %+v", committed, n, offs)
		}
	})

	t.Run("wrong password", func(t *testing.T) {
		const topic = "sarama-refused"
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
		cfg := saramaConfig("alice", "guess")
		cfg.Metadata.Retry.Max = 0
		prod, err := sarama.NewSyncProducer(addrs, cfg)
		if err == nil {
			prod.Close()
			t.Fatal("a wrong password was served")
		}
		if !errors.Is(err, sarama.ErrSASLAuthenticationFailed) {
			t.Fatalf("sarama with a wrong password: %v, want %v", err, sarama.ErrSASLAuthenticationFailed)
		}
		offs, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		if o, _ := offs.Lookup(topic, 0); o.Offset != 0 {
			t.Fatalf("end offset %d after a refused producer, want 0", o.Offset)
		}
	})
}
