package protocol

import (
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// frameOf encodes req as a request frame body (without the size prefix),
// as a client would.
func frameOf(req kmsg.Request, corr int32, clientID string) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, uint16(len(clientID)))
	b = append(b, clientID...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	return req.AppendTo(b)
}

// FuzzRequestFrame feeds arbitrary frames to the request decoder: it must
// return a request or an error, never panic, and a decoded request must
// carry a version inside the registered range.
func FuzzRequestFrame(f *testing.F) {
	seed := []kmsg.Request{
		kmsg.NewPtrApiVersionsRequest(),
		kmsg.NewPtrMetadataRequest(),
		kmsg.NewPtrProduceRequest(),
		kmsg.NewPtrFetchRequest(),
		kmsg.NewPtrListOffsetsRequest(),
		kmsg.NewPtrCreateTopicsRequest(),
		kmsg.NewPtrDescribeConfigsRequest(),
		kmsg.NewPtrInitProducerIDRequest(),
	}
	for _, r := range seed {
		for _, v := range []int16{0, 3, 4, 9, 12} {
			if v > r.MaxVersion() {
				continue
			}
			r.SetVersion(v)
			f.Add(frameOf(r, 1, "fuzz"))
		}
	}
	f.Add([]byte{0, 18, 0, 99, 0, 0, 0, 1, 0xff, 0xff})
	f.Add([]byte{0x7f, 0x7f, 0, 0, 0, 0, 0, 1, 0, 0})
	f.Fuzz(func(t *testing.T, frame []byte) {
		r, a, sl, err := decodeFrame(frame)
		if err != nil {
			return
		}
		if sl == nil {
			t.Fatal("no slot for a decoded frame")
		}
		if a == nil {
			// Prepared ApiVersions fallback.
			if sl.resp == nil || sl.resp.Key() != 18 || sl.resp.GetVersion() != 0 {
				t.Fatalf("fallback answer %+v", sl.resp)
			}
			return
		}
		if r.Version < a.min || r.Version > a.max || r.Msg.Key() != r.Key {
			t.Fatalf("decoded key %d v%d outside %d-%d", r.Key, r.Version, a.min, a.max)
		}
	})
}
