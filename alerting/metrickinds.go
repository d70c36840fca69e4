package alerting

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-io/sluice/internal/human"
)

// The conditions of the kinds on broker metrics (see brokermetrics.go and
// metricrates.go). Subjects: "broker:ID" for the per-broker kinds,
// "client:USER/CLIENT_ID" for throttled clients, "registry:schemas" for
// the schema registry's compatibility failures (summed over every host).

type extraFunc func() (map[string]any, map[string]string, []Link)

type addFunc func(subject string, holds bool, value, summary string, extra extraFunc)

// registrySubjectName is the one subject of schema_incompatible rules.
const registrySubjectName = "schemas"

// perMinute formats a rate per minute in words.
func perMinute(v float64) string {
	return human.Number(math.Round(v*100)/100) + " per minute"
}

func (e *evaluator) observeMetrics(r Rule, in *inputs, m matcher, states map[string]*alertState, now time.Time,
	obs map[string]*observation, add addFunc) {
	unknown := func(subject string) { obs[subject] = &observation{subject: subject, unknown: true} }
	// notYet: a rate that needs a second read. An open alert stays as it
	// is; otherwise the subject reads "not measured yet".
	notYet := func(subject, what string) {
		if states[subject] != nil {
			unknown(subject)
			return
		}
		add(subject, false, "not measured yet", what+" has been read once: its rate needs a second evaluation round", nil)
	}
	brokerExtra := func(h hostRound, details map[string]any, kv ...string) extraFunc {
		id := strconv.Itoa(int(h.broker))
		return func() (map[string]any, map[string]string, []Link) {
			details["broker"] = h.broker
			details["metrics"] = h.addr
			return details, e.labels(r, append([]string{"broker", id}, kv...)...), e.links(r, "/brokers/"+id, "Broker "+id)
		}
	}
	// eachBroker calls fn for each host whose broker the rule names and
	// whose metrics were read; a host that could not be read makes its
	// subject unknown.
	eachBroker := func(fn func(h hostRound, id, subject string)) {
		for _, h := range in.metrics {
			id := strconv.Itoa(int(h.broker))
			if !m.name(id) {
				continue
			}
			subject := brokerSubject(h.broker)
			if h.err != nil {
				unknown(subject)
				continue
			}
			fn(h, id, subject)
		}
	}
	switch r.Kind {
	case KindAuthFailures, KindAuthzDenials:
		family, what, by := MetricAuthFailures, "failed authentications", []string{"listener", "mechanism"}
		if r.Kind == KindAuthzDenials {
			family, what, by = MetricAuthzDenials, "authorization denials", []string{"resource_type", "operation"}
		}
		eachBroker(func(h hostRound, id, subject string) {
			if h.fresh {
				notYet(subject, "broker "+id)
				return
			}
			var total float64
			breakdown := map[string]float64{}
			for _, s := range h.series {
				if s.Name != family || !s.hasRate {
					continue
				}
				if r.Scope.Listener != "" && !strings.EqualFold(s.Labels["listener"], r.Scope.Listener) {
					continue
				}
				v := s.rate * 60
				total += v
				if v > 0 {
					breakdown[s.Labels[by[0]]+"/"+s.Labels[by[1]]] += math.Round(v*100) / 100
				}
			}
			where := ""
			var kv []string
			if r.Scope.Listener != "" {
				where = " on listener " + r.Scope.Listener
				kv = []string{"listener", r.Scope.Listener}
			}
			add(subject, total > r.Threshold, perMinute(total),
				fmt.Sprintf("broker %d: %s %s%s (threshold %s)", h.broker, perMinute(total), what, where, human.Number(r.Threshold)),
				brokerExtra(h, map[string]any{"per_minute": math.Round(total*100) / 100, "by_" + by[0] + "_" + by[1]: breakdown}, kv...))
		})
	case KindHangingTxn:
		eachBroker(func(h hostRound, _, subject string) {
			oldest, found := 0.0, false
			for _, s := range h.series {
				if s.Name == MetricTxnOldestOpen {
					oldest, found = max(oldest, s.Value), true
				}
			}
			if !found {
				return // this broker exports no transaction metrics
			}
			age := time.Duration(oldest * float64(time.Second))
			value := "none open"
			if oldest > 0 {
				value = human.Duration(age) + " open"
			}
			add(subject, oldest > r.Threshold, value,
				fmt.Sprintf("broker %d: the oldest transaction it coordinates has been open %s (threshold %s)", h.broker, human.Duration(age),
					human.Duration(time.Duration(r.Threshold*float64(time.Second)))),
				brokerExtra(h, map[string]any{"oldest_open_seconds": math.Round(oldest)}))
		})
	case KindReassignStuck:
		eachBroker(func(h hostRound, _, subject string) {
			remaining, since, found := 0.0, time.Time{}, false
			for _, s := range h.series {
				if s.Name == MetricReassignRemaining {
					remaining += s.Value
					found = true
					if s.since.After(since) {
						since = s.since // progress anywhere is progress
					}
				}
			}
			if !found {
				return
			}
			if remaining <= 0 {
				add(subject, false, "nothing left to move", fmt.Sprintf("broker %d has no partition move with bytes left to copy", h.broker), nil)
				return
			}
			still := now.Sub(since)
			left := human.BytesText(int64(min(remaining, math.MaxInt64)))
			add(subject, still.Seconds() >= r.Threshold, fmt.Sprintf("%s left, unchanged for %s", left, human.Duration(still)),
				fmt.Sprintf("broker %d: %s left to move, no progress for %s (threshold %s)", h.broker, left, human.Duration(still),
					human.Duration(time.Duration(r.Threshold*float64(time.Second)))),
				brokerExtra(h, map[string]any{"bytes_remaining": remaining, "unchanged_seconds": math.Round(still.Seconds())}))
		})
	case KindClientThrottled:
		type client struct {
			user, id string
			rate     float64 // the largest, over brokers and quota types
			broker   int32
			quota    string
			failed   bool // a host that throttled it before could not be read
			fresh    bool // a host that throttles it was read for the first time
		}
		clients := map[string]*client{}
		get := func(l map[string]string) *client {
			k := l["user"] + "/" + l["client_id"]
			c := clients[k]
			if c == nil {
				c = &client{user: l["user"], id: l["client_id"], broker: -1}
				clients[k] = c
			}
			return c
		}
		for _, h := range in.metrics {
			switch {
			case h.err != nil:
				for k, s := range h.prevSeries {
					if k.name == MetricThrottleSeconds {
						get(s.Labels).failed = true
					}
				}
				continue
			case h.fresh:
				for _, s := range h.series {
					if s.Name == MetricThrottleSeconds {
						get(s.Labels).fresh = true
					}
				}
				continue
			}
			for _, s := range h.series {
				if s.Name != MetricThrottleSeconds || !s.hasRate {
					continue
				}
				c := get(s.Labels)
				if s.rate > c.rate || c.broker < 0 {
					c.rate, c.broker, c.quota = max(s.rate, c.rate), h.broker, s.Labels["quota_type"]
				}
			}
		}
		names := make([]string, 0, len(clients))
		for k := range clients {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, name := range names {
			c := clients[name]
			if !m.name(name) {
				continue
			}
			subject := "client:" + name
			holds := c.rate > r.Threshold
			switch {
			case !holds && c.failed:
				unknown(subject)
				continue
			case !holds && c.fresh:
				notYet(subject, "a broker throttling client "+name)
				continue
			}
			rate := math.Round(c.rate*1000) / 1000
			value := fmt.Sprintf("%s s/s", human.Number(rate))
			summary := fmt.Sprintf("client %q of user %q is throttled %s seconds per second", c.id, c.user, human.Number(rate))
			if c.broker >= 0 && c.rate > 0 {
				summary += fmt.Sprintf(" (%s quota on broker %d)", c.quota, c.broker)
			}
			add(subject, holds, value, summary+fmt.Sprintf(", threshold %s", human.Number(r.Threshold)),
				func() (map[string]any, map[string]string, []Link) {
					return map[string]any{"user": c.user, "client_id": c.id, "throttled_seconds_per_second": rate, "broker": c.broker, "quota_type": c.quota},
						e.labels(r, "user", c.user, "client_id", c.id), e.links(r, "", "")
				})
		}
	case KindSchemaIncompatible:
		if !m.name(registrySubjectName) {
			return
		}
		subject := "registry:" + registrySubjectName
		var failures, checks float64
		found, failed, fresh := false, false, false
		for _, h := range in.metrics {
			if h.err != nil {
				for k := range h.prevSeries {
					if k.name == MetricSchemaChecks {
						failed = true
					}
				}
				continue
			}
			for _, s := range h.series {
				if s.Name != MetricSchemaChecks {
					continue
				}
				found = true
				if h.fresh {
					fresh = true
					continue
				}
				checks += s.rate * 60
				if s.Labels["result"] == "incompatible" {
					failures += s.rate * 60
				}
			}
		}
		holds := failures > r.Threshold
		switch {
		case !holds && failed:
			unknown(subject)
			return
		case !holds && fresh:
			notYet(subject, "a schema registry host")
			return
		case !found:
			return // no host runs a schema registry
		}
		add(subject, holds, perMinute(failures),
			fmt.Sprintf("the schema registry refused %s schemas as incompatible, of %s checks (threshold %s)", perMinute(failures), perMinute(checks),
				human.Number(r.Threshold)),
			func() (map[string]any, map[string]string, []Link) {
				return map[string]any{"incompatible_per_minute": math.Round(failures*100) / 100, "checks_per_minute": math.Round(checks*100) / 100},
					e.labels(r), e.links(r, "/schemas", "Schemas")
			})
	}
}
