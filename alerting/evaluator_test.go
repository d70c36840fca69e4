package alerting

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func historyEvents(t *testing.T, env *testEnv, ruleID int64) []string {
	t.Helper()
	h, err := env.svc.History(context.Background(), HistoryQuery{RuleID: ruleID, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := len(h) - 1; i >= 0; i-- {
		out = append(out, h[i].Subject+" "+h[i].Event)
	}
	return out
}

func openAlerts(t *testing.T, env *testEnv) map[string]Alert {
	t.Helper()
	as, err := env.svc.Alerts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]Alert{}
	for _, a := range as {
		out[a.RuleName+" "+a.Subject] = a
	}
	return out
}

// TestGroupStatusRuleFromScriptedCommits feeds the evaluator commit
// histories that produce each Burrow status and checks which groups alert
// and with what status.
func TestGroupStatusRuleFromScriptedCommits(t *testing.T) {
	clk := newClock()
	src := &scriptedLag{}
	env := newTestService(t, func(c *Config) {
		c.Now = clk.Now
		c.Sources.Lag = src
		c.Interval = time.Minute
	})
	warn := env.rule(t, Rule{Name: "burrow warn", Kind: KindGroupStatus, MinStatus: StatusWarn})
	errRule := env.rule(t, Rule{Name: "burrow err", Kind: KindGroupStatus, MinStatus: StatusErr})
	// Ten rounds, a minute apart. Commit times are given, as a group
	// coordinator that knows them would.
	for i := int64(0); i < 10; i++ {
		at := clk.Now()
		p := func(topic string, off, lag int64, commitAt time.Time) PartitionLag {
			return PartitionLag{Topic: topic, Partition: 0, Committed: off, Lag: lag, CommitTime: commitAt}
		}
		rewindOff := 100 + i*10
		if i == 7 {
			rewindOff = 5 // offsets reset backwards
		}
		stopAt := at
		if i > 4 {
			stopAt = clk.Now().Add(-time.Duration(i-4) * time.Minute) // last commit at round 4
		}
		stopOff := min(i, 4) * 10
		src.groups = []GroupLag{
			{Group: "fine", Members: 1, Partitions: []PartitionLag{p("t", i*10, 5*(i%2), at)}},                    // lag 0 every other round
			{Group: "slow", Members: 1, Partitions: []PartitionLag{p("t", i*10, 50+i, at)}},                       // moves, lag grows
			{Group: "stuck", Members: 1, Partitions: []PartitionLag{p("t", 10, 50+i, at)}},                        // same offset, lag > 0
			{Group: "gone", Members: 0, Partitions: []PartitionLag{p("t", stopOff, 60+i, stopAt)}},                // commits stopped
			{Group: "rewound", Members: 1, Partitions: []PartitionLag{p("t", rewindOff, 80-i, at)}},               // offset went back
			{Group: "mixed", Members: 1, Partitions: []PartitionLag{p("a", i*10, 5*(i%2), at), p("b", 7, 9, at)}}, // OK + STALL
		}
		env.evaluate(t)
		clk.Add(time.Minute)
	}
	open, err := env.svc.Alerts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{ // subject -> group status (both rules see ERR groups)
		"group:slow": "WARN", "group:stuck": "ERR", "group:gone": "ERR", "group:rewound": "ERR", "group:mixed": "ERR",
	}
	got := map[string]string{}
	for _, a := range open {
		if a.RuleID == warn.ID {
			got[a.Subject] = fmt.Sprint(a.Details["status"])
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("WARN rule alerts %v, want %v", got, want)
	}
	partStatus := map[string]string{}
	for _, a := range open {
		if a.RuleID == errRule.ID {
			partStatus[a.Subject] = fmt.Sprint(a.Details["partitions_by_status"])
		}
	}
	wantParts := map[string]string{
		"group:stuck": "map[STALL:1]", "group:gone": "map[STOP:1]", "group:rewound": "map[REWIND:1]", "group:mixed": "map[STALL:1]",
	}
	if fmt.Sprint(partStatus) != fmt.Sprint(wantParts) {
		t.Errorf("ERR rule alerts %v, want %v", partStatus, wantParts)
	}
	if a := openAlerts(t, env)["burrow err group:gone"]; !strings.Contains(a.Summary, "is ERR (1 STOP)") {
		t.Errorf("summary %q", a.Summary)
	}
}

// TestUnreadLagKeepsTheAlert: a round whose source could not read a
// group's partitions (their offsets could not be listed) neither resolves
// a firing lag alert nor, when the read comes back, triggers it again; a
// failed read with enough lag on the partitions read still fires; the
// resolve comes from a round that read the lag as cleared.
func TestUnreadLagKeepsTheAlert(t *testing.T) {
	clk := newClock()
	src := &scriptedLag{}
	env := newTestService(t, func(c *Config) { c.Now = clk.Now; c.Sources.Lag = src })
	pd := newReceiver(t, 202)
	n := env.pagerDuty(t, pd, "0123456789abcdef0123456789abcdef")
	env.rule(t, Rule{Name: "billing", Kind: KindLagRecords, Threshold: 10, NotifierIDs: []int64{n.ID}})
	unread := errors.New("NOT_LEADER_OR_FOLLOWER")
	round := func(parts ...PartitionLag) {
		src.groups = []GroupLag{{Group: "g", State: "Empty", Partitions: parts}}
		env.evaluate(t)
		clk.Add(10 * time.Second)
	}
	round(PartitionLag{Topic: "t", Lag: 50}, PartitionLag{Topic: "t", Partition: 1, Lag: 0})
	round(PartitionLag{Topic: "t", Err: unread}, PartitionLag{Topic: "t", Partition: 1, Err: unread}) // nothing read
	round(PartitionLag{Topic: "t", Err: unread}, PartitionLag{Topic: "t", Partition: 1, Lag: 0})      // the lagging one not read
	round(PartitionLag{Topic: "t", Lag: 50}, PartitionLag{Topic: "t", Partition: 1, Err: unread})     // enough lag read
	round(PartitionLag{Topic: "t", Lag: 50}, PartitionLag{Topic: "t", Partition: 1, Lag: 0})
	if a, ok := openAlerts(t, env)["billing group:g"]; !ok || a.State != StateFiring {
		t.Fatalf("the alert after rounds with unread partitions: %+v (open: %v)", a, ok)
	}
	round(PartitionLag{Topic: "t", Lag: 0}, PartitionLag{Topic: "t", Partition: 1, Lag: 0})
	env.waitDeliveries(t, 2)
	var actions []string
	for _, q := range pd.requests() {
		actions = append(actions, fmt.Sprint(q.Decoded["event_action"]))
	}
	if strings.Join(actions, ",") != "trigger,resolve" {
		t.Fatalf("sent %v, want trigger,resolve", actions)
	}
}

// TestFlappingIsDamped: a condition toggling every round sends at most two
// triggers, then holds; once it settles, the alert resolves once.
func TestFlappingIsDamped(t *testing.T) {
	clk := newClock()
	src := &scriptedLag{}
	env := newTestService(t, func(c *Config) { c.Now = clk.Now; c.Sources.Lag = src })
	pd := newReceiver(t, 202)
	n := env.pagerDuty(t, pd, "0123456789abcdef0123456789abcdef")
	r := env.rule(t, Rule{Name: "flappy", Kind: KindLagRecords, Threshold: 10, NotifierIDs: []int64{n.ID}})
	set := func(lag int64) {
		src.groups = []GroupLag{{Group: "g", Partitions: []PartitionLag{{Topic: "t", Lag: lag}}}}
	}
	for i := 0; i < 16; i++ {
		set(int64(100 * ((i + 1) % 2))) // 100, 0, 100, 0, ...
		env.evaluate(t)
		clk.Add(10 * time.Second)
	}
	set(0)
	for i := 0; i < flapWindow+2; i++ {
		env.evaluate(t)
		clk.Add(10 * time.Second)
	}
	reqs := func() []received { return pd.requests() }
	var deliveredAll []Delivery
	deliveredAll = env.waitDeliveries(t, 4)
	var actions []string
	for _, q := range reqs() {
		actions = append(actions, fmt.Sprint(q.Decoded["event_action"]))
	}
	if strings.Join(actions, ",") != "trigger,resolve,trigger,resolve" {
		t.Errorf("sent %v (of %d deliveries), want trigger,resolve,trigger,resolve (16 toggles undamped would send 16)", actions, len(deliveredAll))
	}
	ev := strings.Join(historyEvents(t, env, r.ID), ",")
	if !strings.Contains(ev, "group:g flapping") || !strings.Contains(ev, "group:g steady") {
		t.Errorf("history lacks flapping/steady: %s", ev)
	}
	if len(openAlerts(t, env)) != 0 {
		t.Error("alert still open after settling")
	}
}

// TestClusterRules covers the health, disk and comparison kinds, scopes,
// failing sources, disabling and deleting rules.
func TestClusterRules(t *testing.T) {
	clk := newClock()
	health := Health{
		Brokers: []BrokerHealth{{ID: 1, Addr: "h1:9092", Up: true}, {ID: 2, Addr: "h2:9092", Up: false}},
		Topics: []TopicHealth{
			{Topic: "orders", Partitions: 3, UnderReplicated: []int32{0, 2}, MessagesIn: 100},
			{Topic: "payments", Partitions: 2, Offline: []int32{1}, MessagesIn: 50},
			{Topic: "idle", Partitions: 1, MessagesIn: 7},
		},
	}
	var healthErr error
	disk := []LogDir{{Broker: 1, Path: "/data/a", FreeBytes: 5 << 30, TotalBytes: 100 << 30}, {Broker: 1, Path: "/data/b", FreeBytes: 50 << 30, TotalBytes: 100 << 30}}
	comps := []Comparison{{ID: 4, Name: "ORDER vs ORDERNEW", SourceTopic: "ORDER", TargetTopic: "ORDERNEW", Compared: 1000, Mismatched: 2, MissingInTarget: 1}}
	env := newTestService(t, func(c *Config) {
		c.Now = clk.Now
		c.Sources.Health = HealthFunc(func(context.Context) (Health, error) { return health, healthErr })
		c.Sources.Disk = DiskFunc(func(context.Context) ([]LogDir, error) { return disk, nil })
		c.Sources.Comparisons = ComparisonFunc(func(context.Context) ([]Comparison, error) { return comps, nil })
	})
	hook := newReceiver(t, 200)
	n := env.webhook(t, hook, "")
	nid := []int64{n.ID}
	urp := env.rule(t, Rule{Name: "urp", Kind: KindUnderReplicated, Scope: Scope{Pattern: "ord*"}, NotifierIDs: nid})
	env.rule(t, Rule{Name: "urp payments", Kind: KindUnderReplicated, Scope: Scope{Topic: "payments"}})
	env.rule(t, Rule{Name: "offline", Kind: KindOfflinePartitions})
	down := env.rule(t, Rule{Name: "down", Kind: KindBrokerDown, NotifierIDs: nid})
	env.rule(t, Rule{Name: "quiet", Kind: KindProduceStopped})
	env.rule(t, Rule{Name: "disk pct", Kind: KindDiskFreePercent, Threshold: 10})
	env.rule(t, Rule{Name: "disk bytes", Kind: KindDiskFreeBytes, Threshold: 1 << 30})
	env.rule(t, Rule{Name: "compare", Kind: KindComparison, Threshold: 2})
	env.rule(t, Rule{Name: "compare strict", Kind: KindComparison, Threshold: 3})
	noSource := env.rule(t, Rule{Name: "lag without source", Kind: KindLagRecords, Threshold: 1})

	env.evaluate(t)
	health.Topics[0].MessagesIn, health.Topics[1].MessagesIn = 150, 60 // orders and payments produce; idle never did
	clk.Add(time.Minute)
	env.evaluate(t)
	clk.Add(time.Minute)
	env.evaluate(t) // orders and payments did not move this round

	names := func() []string {
		var out []string
		for k := range openAlerts(t, env) {
			out = append(out, k)
		}
		sort.Strings(out)
		return out
	}
	want := []string{
		"compare comparison:ORDER vs ORDERNEW",
		"disk pct logdir:1:/data/a",
		"down broker:2",
		"offline topic:payments",
		"quiet topic:orders",
		"quiet topic:payments",
		"urp topic:orders",
	}
	if got := names(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("open alerts\n got %v\nwant %v", got, want)
	}
	st := env.svc.Status()
	if st.SourceErrors[sourceLag] == "" || st.Rules != 10 || st.Firing != 7 {
		t.Errorf("status %+v", st)
	}
	_ = noSource

	// A failing source changes nothing: no resolve while it is down.
	healthErr = errors.New("metadata timeout")
	health.Brokers[1].Up = true
	env.evaluate(t)
	if got := names(); len(got) != len(want) {
		t.Errorf("alerts changed while the source failed: %v", got)
	}
	if env.svc.Status().SourceErrors[sourceHealth] != "metadata timeout" {
		t.Errorf("source error not reported")
	}
	healthErr = nil
	env.evaluate(t)
	if _, ok := openAlerts(t, env)["down broker:2"]; ok {
		t.Error("broker 2 is up again but its alert is open")
	}

	// Disabling a rule resolves its alerts at the next round; deleting one
	// resolves them at once.
	if err := env.svc.SetRuleEnabled(context.Background(), urp.ID, false); err != nil {
		t.Fatal(err)
	}
	env.evaluate(t)
	if err := env.svc.DeleteRule(context.Background(), down.ID); err != nil {
		t.Fatal(err)
	}
	env.waitDeliveries(t, 4)
	var msgs []string
	for _, q := range hook.requests() {
		a := q.Decoded["alerts"].([]any)[0].(map[string]any)
		l := a["labels"].(map[string]any)
		msgs = append(msgs, fmt.Sprint(l["alertname"], " ", a["status"]))
	}
	sort.Strings(msgs)
	if fmt.Sprint(msgs) != "[down firing down resolved urp firing urp resolved]" {
		t.Errorf("webhook messages %v", msgs)
	}
	if ev := historyEvents(t, env, down.ID); fmt.Sprint(ev) != "[broker:2 firing broker:2 resolved]" {
		t.Errorf("history of deleted rule %v", ev)
	}
}

func TestKadmHealthAndLocalDisk(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	seeds := kafkaSeeds(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	topic := fmt.Sprintf("health-%d", rand.Uint32())
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	h, err := KadmHealth(adm, 999).Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var up, downs int
	for _, b := range h.Brokers {
		if b.Up {
			up++
		} else if b.ID == 999 {
			downs++
		}
	}
	if up == 0 || downs != 1 {
		t.Errorf("brokers %+v", h.Brokers)
	}
	var found bool
	for _, th := range h.Topics {
		if th.Topic == topic {
			found = true
			if th.Partitions != 2 || th.MessagesIn != 5 || len(th.Offline) != 0 || len(th.UnderReplicated) != 0 {
				t.Errorf("topic health %+v", th)
			}
		}
	}
	if !found {
		t.Errorf("topic %s missing from %+v", topic, h.Topics)
	}
	dirs, err := LocalDisk(1, t.TempDir()).LogDirs(ctx)
	if err != nil || len(dirs) != 1 || dirs[0].TotalBytes == 0 || dirs[0].FreeBytes > dirs[0].TotalBytes {
		t.Errorf("local disk %+v %v", dirs, err)
	}
	if _, err := LocalDisk(1, "/does/not/exist").LogDirs(ctx); err == nil {
		t.Error("missing dir gave no error")
	}
}
