package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/record"
)

func (h *harness) txnCommit(group, member string, gen int32, pid int64, offsets map[int32]int64) map[int32]int16 {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version = 3
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = "tx", group, pid, 0
	req.Generation, req.MemberID = gen, member
	t := kmsg.NewTxnOffsetCommitRequestTopic()
	t.Topic = "t"
	for p, o := range offsets {
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = p, o, -1
		t.Partitions = append(t.Partitions, rp)
	}
	req.Topics = append(req.Topics, t)
	var resp *kmsg.TxnOffsetCommitResponse
	h.do(func() {
		h.st.txnCommit(req, txnCommitParts(req, h.st.cfg.MaxMetadataBytes, exists(nil)), func(r *kmsg.TxnOffsetCommitResponse) { resp = r })
	})
	if resp == nil {
		h.t.Fatal("TxnOffsetCommit not answered")
	}
	codes := make(map[int32]int16)
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			codes[rp.Partition] = rp.ErrorCode
		}
	}
	return codes
}

// fetchStable is OffsetFetch v7 with require_stable: offsets and codes.
func (h *harness) fetchStable(group string, partitions ...int32) (map[int32]int64, map[int32]int16) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version, req.Group, req.RequireStable = 7, group, true
	t := kmsg.NewOffsetFetchRequestTopic()
	t.Topic, t.Partitions = "t", partitions
	req.Topics = append(req.Topics, t)
	var resp *kmsg.OffsetFetchResponse
	h.do(func() { resp = h.st.fetchOffsets(req) })
	offs, codes := map[int32]int64{}, map[int32]int16{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			offs[rp.Partition], codes[rp.Partition] = rp.Offset, rp.ErrorCode
		}
	}
	return offs, codes
}

// loadFrom builds a harness whose partitions are loaded from h's logs.
func loadFrom(t *testing.T, h *harness) *harness {
	h2 := newHarness(t, testConfig())
	h2.now = h.now.Add(time.Second)
	for p := range h.logs {
		h2.st.unload(p)
		h2.st.becomeLeader(p, 1)
		lr := newLoadResult()
		// Offsets as the log assigns them: commits are ordered by them.
		b := append([]byte(nil), h.logs[p]...)
		var off int64
		if err := record.ForEachBatch(b, func(hd *record.BatchHeader, batch []byte) error {
			record.SetBaseOffset(batch, off)
			off += int64(hd.LastOffsetDelta) + 1
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := lr.applyBatches(b, 0); err != nil {
			t.Fatal(err)
		}
		h2.do(func() { h2.st.installLoad(p, 1, lr) })
	}
	return h2
}

func TestTxnOffsetCommitPendingUntilMarker(t *testing.T) {
	h := newHarness(t, testConfig())
	if codes := h.txnCommit("g", "", -1, 9, map[int32]int64{0: 10, 1: 11}); codes[0] != 0 || codes[1] != 0 {
		t.Fatalf("TxnOffsetCommit: %v", codes)
	}
	p := h.group("g").partition
	// Stored as a transactional batch of producer 9 at base sequence 0.
	if err := record.ForEachBatch(h.logs[p], func(hd *record.BatchHeader, _ []byte) error {
		if !hd.Transactional() || hd.ProducerID != 9 || hd.BaseSequence != 0 {
			t.Fatalf("batch header %+v", hd)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	offs, codes := h.fetchStable("g", 0, 1)
	if codes[0] != kerr.UnstableOffsetCommit.Code || offs[0] != -1 {
		t.Fatalf("require_stable while pending: %v %v", offs, codes)
	}
	if got, _ := h.fetch("g", 0); got[0] != -1 {
		t.Fatalf("a pending offset is visible: %v", got)
	}
	// A reload keeps it pending.
	if _, codes := loadFrom(t, h).fetchStable("g", 0); codes[0] != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("after reload: %v", codes)
	}

	h.do(func() { h.st.txnMarker(p, 9, true) })
	h.logs[p] = record.AppendEndTxnMarker(h.logs[p], record.EndTxnMarker{ProducerID: 9, Commit: true}, 1)
	if offs, codes := h.fetchStable("g", 0, 1); codes[0] != 0 || offs[0] != 10 || offs[1] != 11 {
		t.Fatalf("after COMMIT: %v %v", offs, codes)
	}
	// An aborted one is dropped.
	h.txnCommit("g", "", -1, 10, map[int32]int64{0: 99})
	h.do(func() { h.st.txnMarker(p, 10, false) })
	h.logs[p] = record.AppendEndTxnMarker(h.logs[p], record.EndTxnMarker{ProducerID: 10}, 1)
	if offs, codes := h.fetchStable("g", 0); codes[0] != 0 || offs[0] != 10 {
		t.Fatalf("after ABORT: %v %v", offs, codes)
	}
	// A plain commit written after a pending one wins over it.
	h.txnCommit("g", "", -1, 11, map[int32]int64{1: 50})
	h.commit(8, "g", "", -1, map[int32]int64{1: 60})
	h.do(func() { h.st.txnMarker(p, 11, true) })
	h.logs[p] = record.AppendEndTxnMarker(h.logs[p], record.EndTxnMarker{ProducerID: 11, Commit: true}, 1)
	if offs, _ := h.fetchStable("g", 1); offs[1] != 60 {
		t.Fatalf("plain commit after the transactional one: %v", offs)
	}
	// The log says the same after a reload: markers parsed.
	h2 := loadFrom(t, h)
	if offs, codes := h2.fetchStable("g", 0, 1); codes[0] != 0 || codes[1] != 0 || offs[0] != 10 || offs[1] != 60 {
		t.Fatalf("reloaded: %v %v", offs, codes)
	}
}

// KIP-447: a TxnOffsetCommit naming a member is checked against the group.
func TestTxnOffsetCommitFencing(t *testing.T) {
	h := newHarness(t, testConfig())
	ids, gen := h.stableGroup("g", 1, joinOpts{session: 10 * time.Second})
	if codes := h.txnCommit("g", "nobody", gen, 1, map[int32]int64{0: 1}); codes[0] != kerr.UnknownMemberID.Code {
		t.Fatalf("unknown member: %v", codes)
	}
	if codes := h.txnCommit("g", ids[0], gen+1, 1, map[int32]int64{0: 1}); codes[0] != kerr.IllegalGeneration.Code {
		t.Fatalf("wrong generation: %v", codes)
	}
	if codes := h.txnCommit("g", ids[0], gen, 1, map[int32]int64{0: 1}); codes[0] != 0 {
		t.Fatalf("member's commit: %v", codes)
	}
	if codes := h.txnCommit("other", "m", 3, 1, map[int32]int64{0: 1}); codes[0] != kerr.IllegalGeneration.Code {
		t.Fatalf("unknown group with a generation: %v", codes)
	}
}
