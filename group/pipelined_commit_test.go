package group_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// pipelineCommits sends the OffsetCommits of reqs (simple consumers) on
// one new connection in one write, as a pipelining client does, and
// returns each answer's error, in order.
func pipelineCommits(addr string, reqs []*kmsg.OffsetCommitRequest) error {
	nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return err
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("pipelined-commits"))
	var out []byte
	for i, r := range reqs {
		// AppendRequest writes the frame's size at the start of dst:
		// each frame is encoded on its own.
		out = append(out, f.AppendRequest(nil, r, int32(i))...)
	}
	if _, err := nc.Write(out); err != nil {
		return err
	}
	br := bufio.NewReader(nc)
	for i, r := range reqs {
		var hdr [8]byte
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return fmt.Errorf("answer %d: %w", i, err)
		}
		size := int(binary.BigEndian.Uint32(hdr[:]))
		if corr := int32(binary.BigEndian.Uint32(hdr[4:])); corr != int32(i) {
			return fmt.Errorf("answer %d has correlation id %d", i, corr)
		}
		body := make([]byte, size-4)
		if _, err := io.ReadFull(br, body); err != nil {
			return err
		}
		resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
		if err := resp.ReadFrom(body[1:]); err != nil { // after the flexible header's tags
			return err
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return fmt.Errorf("commit %d (%s): %w", i, r.Group, err)
				}
			}
		}
	}
	return nil
}

// TestPipelinedCommitsStoredAndReloaded: connections at once each send a
// run of OffsetCommits in one write, several per group, to groups of
// several __consumer_offsets partitions; every commit is answered in
// order without error, each group's offsets are its last commits', and
// they still are after a restart, loaded from __consumer_offsets.
func TestPipelinedCommitsStoredAndReloaded(t *testing.T) {
	n := startNode(t)
	n.createTopic("orders", 4)
	commitAt(t, n, "warm-up", "orders", 0) // __consumer_offsets exists and is loaded

	const conns, perConn, groupsPerConn = 4, 30, 3
	type tp struct {
		group     string
		partition int32
	}
	want := make(map[tp]int64)
	runs := make([][]*kmsg.OffsetCommitRequest, conns)
	for c := range conns {
		for i := range perConn {
			req := kmsg.NewPtrOffsetCommitRequest()
			req.Version = 8
			req.Group, req.Generation = fmt.Sprintf("pipelined-%d-%d", c, i%groupsPerConn), -1
			p := int32(i % 4)
			off := int64(100*c + i + 1)
			req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "orders", Partitions: []kmsg.OffsetCommitRequestTopicPartition{
				{Partition: p, Offset: off, LeaderEpoch: -1},
			}}}
			runs[c] = append(runs[c], req)
			want[tp{req.Group, p}] = off // a later commit of the group's partition wins
		}
	}
	before := n.groups().Stats()
	var wg sync.WaitGroup
	for c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := pipelineCommits(n.addr, runs[c]); err != nil {
				t.Errorf("connection %d: %v", c, err)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	after := n.groups().Stats()
	t.Logf("%d commits in %d appends", after.Batches-before.Batches, after.Appends-before.Appends)

	check := func(when string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		adm := n.admin()
		for c := range conns {
			for g := range groupsPerConn {
				name := fmt.Sprintf("pipelined-%d-%d", c, g)
				resp, err := adm.FetchOffsets(ctx, name)
				if err != nil {
					t.Fatalf("%s: fetch offsets of %s: %v", when, name, err)
				}
				for p := range int32(4) {
					w, ok := want[tp{name, p}]
					o, got := resp.Lookup("orders", p)
					switch {
					case !ok && got:
						t.Errorf("%s: %s has an offset for partition %d", when, name, p)
					case ok && (!got || o.Err != nil || o.At != w):
						t.Errorf("%s: %s partition %d: %+v, want offset %d", when, name, p, o, w)
					}
				}
			}
		}
	}
	check("after the commits")
	n.restart()
	check("after a restart")
}
