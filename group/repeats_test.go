package group_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestGroupNamedManyTimes: DescribeGroups and OffsetFetch (v8, several
// groups) naming one group many times describe it once and answer its
// repeats INVALID_REQUEST: an answer is as large as the group's state, not
// as large as a request's repetitions make it (a group with big member
// metadata, named a million times in a few MB, was a response of that
// metadata a million times over).
func TestGroupNamedManyTimes(t *testing.T) {
	n := startNode(t)
	n.createTopic("orders", 1)
	commitAt(t, n, "g", "orders", 5)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := n.client()
	const repeats = 1000

	dg := kmsg.NewPtrDescribeGroupsRequest()
	for range repeats {
		dg.Groups = append(dg.Groups, "g")
	}
	dgr, err := dg.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(dgr.Groups) != repeats || dgr.Groups[0].ErrorCode != 0 || dgr.Groups[0].State != "Empty" {
		t.Fatalf("DescribeGroups: %d groups answered, first %+v", len(dgr.Groups), dgr.Groups[0])
	}
	for _, g := range dgr.Groups[1:] {
		if g.ErrorCode != kerr.InvalidRequest.Code || g.Group != "g" {
			t.Fatalf("a repeat of g: %v", kerr.ErrorForCode(g.ErrorCode))
		}
	}

	of := kmsg.NewPtrOffsetFetchRequest()
	of.Version = 8
	for range repeats {
		of.Groups = append(of.Groups, kmsg.OffsetFetchRequestGroup{Group: "g"})
	}
	ofr, err := of.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(ofr.Groups) != repeats || ofr.Groups[0].ErrorCode != 0 || len(ofr.Groups[0].Topics) != 1 || ofr.Groups[0].Topics[0].Partitions[0].Offset != 5 {
		t.Fatalf("OffsetFetch: %d groups answered, first %+v", len(ofr.Groups), ofr.Groups[0])
	}
	for _, g := range ofr.Groups[1:] {
		if g.ErrorCode != kerr.InvalidRequest.Code || len(g.Topics) != 0 {
			t.Fatalf("a repeat of g: %v with %d topics", kerr.ErrorForCode(g.ErrorCode), len(g.Topics))
		}
	}
}
