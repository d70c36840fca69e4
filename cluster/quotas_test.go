package cluster

import (
	"errors"
	"testing"
)

func TestQuotaEntityPath(t *testing.T) {
	for _, c := range []struct {
		e    QuotaEntity
		path string
	}{
		{QuotaEntity{User: "alice"}, "users/alice"},
		{QuotaEntity{User: DefaultQuotaName}, "users/<default>"},
		{QuotaEntity{User: "CN=a b,O=x"}, "users/CN%3Da%20b%2CO%3Dx"},
		{QuotaEntity{User: "alice", ClientID: DefaultQuotaName}, "users/alice/clients/<default>"},
		{QuotaEntity{User: DefaultQuotaName, ClientID: "app/1"}, "users/<default>/clients/app%2F1"},
		{QuotaEntity{ClientID: "app"}, "clients/app"},
		{QuotaEntity{ClientID: DefaultQuotaName}, "clients/<default>"},
	} {
		if got := c.e.Path(); got != c.path {
			t.Errorf("%v: path %q, want %q", c.e, got, c.path)
		}
		back, err := ParseQuotaPath(c.path)
		if err != nil || back != c.e {
			t.Errorf("ParseQuotaPath(%q) = %v, %v; want %v", c.path, back, err, c.e)
		}
	}
	for _, bad := range []string{"users", "users/", "clients/a/b", "users/a/clients/", "users/a/other/b", "topics/t", "users/%zz"} {
		if e, err := ParseQuotaPath(bad); err == nil {
			t.Errorf("ParseQuotaPath(%q) = %v, want an error", bad, e)
		}
	}
}

func TestValidateQuotaOps(t *testing.T) {
	user := QuotaEntity{User: "u"}
	both := QuotaEntity{User: "u", ClientID: "c"}
	for _, c := range []struct {
		e   QuotaEntity
		op  QuotaOp
		bad bool
	}{
		{user, QuotaOp{Key: QuotaProducerByteRate, Value: 1024}, false},
		{user, QuotaOp{Key: QuotaRequestPercentage, Value: 0.5}, false},
		{user, QuotaOp{Key: QuotaControllerMutationRate, Value: 2.5}, false},
		{both, QuotaOp{Key: QuotaControllerMutationRate, Value: 2.5}, true},
		{user, QuotaOp{Key: QuotaProducerByteRate, Value: 1.5}, true},
		{user, QuotaOp{Key: QuotaConsumerByteRate, Value: 0}, true},
		{user, QuotaOp{Key: QuotaRequestPercentage, Value: -1}, true},
		{user, QuotaOp{Key: "SCRAM-SHA-256", Value: 1}, true},
		{user, QuotaOp{Key: "nope", Remove: true}, true},
		{user, QuotaOp{Key: QuotaProducerByteRate, Remove: true}, false},
	} {
		err := ValidateQuotaOps(c.e, []QuotaOp{c.op})
		if (err != nil) != c.bad || err != nil && !errors.Is(err, ErrInvalidQuota) {
			t.Errorf("%v %+v: %v, want bad=%v", c.e, c.op, err, c.bad)
		}
	}
	if err := ValidateQuotaEntity(QuotaEntity{}); !errors.Is(err, ErrInvalidQuota) {
		t.Errorf("empty entity: %v", err)
	}
	// Other keys of the map (a user's SCRAM credentials) are kept.
	cfg := map[string]string{"SCRAM-SHA-256": "salt=x", QuotaConsumerByteRate: "5"}
	ApplyQuotaOps(cfg, []QuotaOp{{Key: QuotaProducerByteRate, Value: 1e9}, {Key: QuotaRequestPercentage, Value: 12.5}, {Key: QuotaConsumerByteRate, Remove: true}})
	want := map[string]string{"SCRAM-SHA-256": "salt=x", QuotaProducerByteRate: "1000000000", QuotaRequestPercentage: "12.5"}
	if len(cfg) != len(want) {
		t.Fatalf("config %v, want %v", cfg, want)
	}
	for k, v := range want {
		if cfg[k] != v {
			t.Errorf("%s = %q, want %q", k, cfg[k], v)
		}
	}
	if q := QuotaValues(cfg); len(q) != 2 || q[QuotaProducerByteRate] != 1e9 || q[QuotaRequestPercentage] != 12.5 {
		t.Errorf("QuotaValues %v", q)
	}
}
