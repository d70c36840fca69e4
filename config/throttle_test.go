package config

import (
	"slices"
	"testing"
)

func TestParseThrottledReplicas(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want ThrottledReplicas
		str  string
	}{
		{"", ThrottledReplicas{}, ""},
		{" * ", ThrottledReplicas{All: true}, "*"},
		{"0:1", ThrottledReplicas{Pairs: []ReplicaRef{{0, 1}}}, "0:1"},
		{"0:101, 1:102 ,1:103", ThrottledReplicas{Pairs: []ReplicaRef{{0, 101}, {1, 102}, {1, 103}}}, "0:101,1:102,1:103"},
	} {
		got, err := ParseThrottledReplicas(tc.in)
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if got.All != tc.want.All || !slices.Equal(got.Pairs, tc.want.Pairs) || got.String() != tc.str {
			t.Errorf("%q: %+v (%q), want %+v (%q)", tc.in, got, got.String(), tc.want, tc.str)
		}
	}
	for _, bad := range []string{"0", "a:1", "0:b", "-1:2", "0:1,", "*,0:1", "0:1:2", "99999999999:1"} {
		if _, err := ParseThrottledReplicas(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	r, _ := ParseThrottledReplicas("0:1,1:2,2:1")
	if parts, all := r.PartitionsOf(1); all || !slices.Equal(parts, []int32{0, 2}) {
		t.Errorf("PartitionsOf(1) = %v %v", parts, all)
	}
	if _, all := (ThrottledReplicas{All: true}).PartitionsOf(7); !all {
		t.Error("* does not throttle every partition")
	}
	// The topic configs check their values with the same rule.
	k, ok := LookupAcceptedTopic(LeaderThrottledReplicas)
	if !ok {
		t.Fatal("no", LeaderThrottledReplicas)
	}
	if err := k.CheckValue("0:1,1:2"); err != nil {
		t.Errorf("0:1,1:2: %v", err)
	}
	if err := k.CheckValue("0-1"); err == nil {
		t.Error("0-1 accepted")
	}
}
