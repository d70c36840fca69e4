package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestOffsetFetchTopicNamedManyTimes: a topic named N times in an
// OffsetFetch, one partition each, is answered once with its N partitions.
// It was answered N times with all N partitions each: N² entries from a
// request of N (a million from 8 KB at N = 1,000, a hundred million from
// 1 MB).
func TestOffsetFetchTopicNamedManyTimes(t *testing.T) {
	h := newHarness(t, testConfig())
	const n = 1000
	for _, version := range []int16{1, 7, 8} {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = version
		topics := make([]kmsg.OffsetFetchRequestTopic, n)
		gtopics := make([]kmsg.OffsetFetchRequestGroupTopic, n)
		for i := range n {
			topics[i] = kmsg.OffsetFetchRequestTopic{Topic: "t", Partitions: []int32{int32(i)}}
			gtopics[i] = kmsg.OffsetFetchRequestGroupTopic{Topic: "t", Partitions: []int32{int32(i)}}
		}
		if version >= 8 {
			req.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g", Topics: gtopics}}
		} else {
			req.Group, req.Topics = "g", topics
		}
		var resp *kmsg.OffsetFetchResponse
		h.do(func() { resp = h.st.fetchOffsets(req) })
		var got [][]int
		if version >= 8 {
			for _, g := range resp.Groups {
				var perTopic []int
				for _, tt := range g.Topics {
					perTopic = append(perTopic, len(tt.Partitions))
				}
				got = append(got, perTopic)
			}
		} else {
			var perTopic []int
			for _, tt := range resp.Topics {
				perTopic = append(perTopic, len(tt.Partitions))
			}
			got = append(got, perTopic)
		}
		if len(got) != 1 || len(got[0]) != 1 || got[0][0] != n {
			t.Fatalf("v%d: answer has %d groups, topics %v; want one topic of %d partitions", version, len(got), got[0][:min(len(got[0]), 5)], n)
		}
	}
}
