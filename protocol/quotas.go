package protocol

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/broker"
	"github.com/sluice-io/sluice/quota"
)

// Client quotas (package quota): Produce records the request's size and
// Fetch the record bytes it answers with (consumers only, not followers),
// each against the client's byte-rate quota; every request but the
// exempt ones records the time its handler took against the
// request_percentage quota. The larger throttle time is returned in the
// response's throttle_time_ms and the connection's reads are muted for
// that long once the response is on its way (KIP-219): the client's next
// requests wait in its socket, whatever its version. An acks=0 produce,
// which has no response, is muted the same way.
//
// Two differences from Kafka: a throttled fetch still carries what it
// read (Kafka answers it empty and takes its bytes back out of the rate;
// here they count, so the mute that follows is that much longer, and the
// average rate is held to the quota all the same), and pre-KIP-219
// versions are muted like the others rather than answered late.

// The controller mutation quota (KIP-599, quota.MutationQuota):
// CreateTopics, CreatePartitions and DeleteTopics take one from the
// client's quota for the request (strict from CreateTopics v6,
// CreatePartitions v3, DeleteTopics v5; permissive before) and record each
// topic's partitions once the topic is validated, before it is created,
// grown or deleted, as Kafka's ZkAdminManager does. A topic a strict quota
// refuses gets THROTTLING_QUOTA_EXCEEDED; either way the quota's throttle
// time goes into throttle_time_ms and mutes the connection like the
// others (applyQuotas). validate_only records nothing. Topics Metadata
// creates automatically count too, permissively, as Kafka's
// AutoTopicCreationManager counts them.

// errThrottlingQuota is the error of a topic refused by a strict
// controller mutation quota.
var errThrottlingQuota = &broker.Error{Code: kerr.ThrottlingQuotaExceeded, Msg: kerr.ThrottlingQuotaExceeded.Description}

// mutationQuota returns the request's controller mutation quota: nil when
// none applies to the client, strict or permissive by the request's API
// and version (quota.StrictMutations).
func (s *Server) mutationQuota(r *Request) *quota.MutationQuota {
	q := s.cfg.Quotas
	if q == nil || !q.Enabled(quota.Mutation) {
		return nil
	}
	return q.MutationQuota(r.Principal.Name, r.ClientID, quota.StrictMutations(r.Key, r.Version))
}

// recordMutations takes permits (partitions) from the request's
// controller mutation quota for one topic: errThrottlingQuota when a
// strict quota refuses the topic.
func recordMutations(mq *quota.MutationQuota, permits int) error {
	if mq != nil && !mq.Record(float64(permits), time.Now()) {
		return errThrottlingQuota
	}
	return nil
}

// endMutations keeps the throttle time of the request's controller
// mutation quota as it stands when the handler returns (Kafka deducts the
// time since the violation) for applyQuotas. Handlers defer it.
func endMutations(r *Request, mq *quota.MutationQuota) {
	if d := mq.Throttle(time.Now()); d > r.throttle {
		r.throttle, r.throttleKind = d, quota.Mutation
	}
}

// quotaExempt says whether a request is exempt from the request quota:
// version negotiation and authentication, and the brokers' own requests
// (a follower's fetch, ControlledShutdown), as Kafka exempts requests
// with ClusterAction.
func quotaExempt(r *Request) bool {
	switch r.Key {
	case 7, 17, 18, 36:
		return true
	case 1:
		if f, ok := r.Msg.(*kmsg.FetchRequest); ok && f.ReplicaID >= 0 {
			return true
		}
	}
	return false
}

// recordBandwidth records value bytes against the client's byte-rate
// quota of kind k (Produce, Fetch) and keeps the throttle for the
// response. The caller checked Quotas.Enabled(k).
func (s *Server) recordBandwidth(r *Request, k quota.Kind, bytes int64) {
	d := s.cfg.Quotas.Record(k, r.Principal.Name, r.ClientID, float64(bytes), time.Now())
	if d > r.throttle {
		r.throttle, r.throttleKind = d, k
	}
}

// applyQuotas runs after a request's handler: it records the handler's
// time against the request quota, puts the larger throttle time in the
// response and mutes the connection's reads for it.
// start is when the handler began (zero: the request quota was off then).
func (c *conn) applyQuotas(r *Request, sl *slot, start time.Time) {
	q := c.s.cfg.Quotas
	now := time.Now()
	if !start.IsZero() && q.Enabled(quota.Request) && !quotaExempt(r) {
		end := now
		if d := r.detachedAt.Load(); d != 0 {
			end = time.Unix(0, d)
		}
		d := q.Record(quota.Request, r.Principal.Name, r.ClientID, quota.NanosToPercent(end.Sub(start).Nanoseconds()), now)
		if d > r.throttle {
			r.throttle, r.throttleKind = d, quota.Request
		}
	}
	if r.throttle <= 0 {
		return
	}
	ms := int32(min(r.throttle.Milliseconds(), 1<<31-1))
	switch {
	case sl.stream != nil:
		if f, ok := sl.stream.(*fetchResponse); ok {
			f.throttle = max(f.throttle, ms)
		}
	case sl.resp != nil:
		if t, ok := sl.resp.(interface {
			kmsg.ThrottleResponse
			SetThrottle(int32)
		}); ok {
			if old, _ := t.Throttle(); ms > old {
				t.SetThrottle(ms)
			}
		}
	}
	until := now.Add(r.throttle).UnixNano()
	for {
		old := c.muteUntil.Load()
		if old >= until || c.muteUntil.CompareAndSwap(old, until) {
			break
		}
	}
	if c.s.throttleMx != nil {
		c.s.throttleMx.Add(r.throttleKind.String(), r.Principal.Name, r.ClientID, r.throttle)
	}
}

// waitMuted holds the reader while the connection is muted for a
// throttle; false when the connection is closing.
func (c *conn) waitMuted() bool {
	until := c.muteUntil.Load()
	if until == 0 {
		return true
	}
	d := time.Until(time.Unix(0, until))
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.ctx.Done():
		return false
	case <-c.unmute:
		return false
	}
}
