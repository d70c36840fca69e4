package kwire

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestSkipTags(t *testing.T) {
	// Two tags: (0, 1 byte), (5, 2 bytes), then the body.
	in := []byte{2, 0, 1, 0xaa, 5, 2, 0xbb, 0xcc, 'b', 'o', 'd', 'y'}
	out, err := SkipTags(in)
	if err != nil || string(out) != "body" {
		t.Fatalf("%q %v", out, err)
	}
	for name, b := range map[string][]byte{
		"a tag longer than the buffer": {1, 0, 9, 1},
		"an oversized tag":             {1, 0, 200},
		"an empty section":             nil,
		"a truncated tag":              {1},
	} {
		if _, err := SkipTags(b); err == nil {
			t.Errorf("%s was accepted", name)
		}
	}
}

// TestResponseRoundTrip: what AppendResponse frames, ReadFrame and
// DecodeResponse read back, for a flexible and a non-flexible version, and
// for ApiVersions, whose flexible versions keep response header v0.
func TestResponseRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		req  kmsg.Request
		resp kmsg.Response
		tags bool
	}{
		{kmsg.NewPtrMetadataRequest(), kmsg.NewPtrMetadataResponse(), true},
		{kmsg.NewPtrMetadataRequest(), kmsg.NewPtrMetadataResponse(), false},
		{kmsg.NewPtrApiVersionsRequest(), kmsg.NewPtrApiVersionsResponse(), false},
	} {
		v := tc.req.MaxVersion()
		if !tc.tags && tc.req.Key() != 18 {
			v = 8 // Metadata v8: not flexible
		}
		tc.req.SetVersion(v)
		tc.resp.SetVersion(v)
		if m, ok := tc.resp.(*kmsg.MetadataResponse); ok {
			m.Brokers = append(m.Brokers, kmsg.MetadataResponseBroker{NodeID: 3, Host: "h", Port: 9092})
		}
		framed := AppendResponse([]byte("prefix"), 42, tc.resp)
		framed = framed[len("prefix"):]
		if size := int(binary.BigEndian.Uint32(framed)); size != len(framed)-4 {
			t.Fatalf("%s v%d: size %d for %d bytes", kmsg.NameForKey(tc.req.Key()), v, size, len(framed)-4)
		}
		if hasTag := framed[8] == 0 && ResponseHeaderTags(tc.resp.Key(), tc.resp.IsFlexible()); hasTag != tc.tags {
			t.Fatalf("%s v%d: header tags %v", kmsg.NameForKey(tc.req.Key()), v, hasTag)
		}
		frame, _, err := ReadFrame(bytes.NewReader(framed), nil, 4, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeResponse(tc.req, 42, frame)
		if err != nil {
			t.Fatalf("%s v%d: %v", kmsg.NameForKey(tc.req.Key()), v, err)
		}
		if !bytes.Equal(got.AppendTo(nil), tc.resp.AppendTo(nil)) {
			t.Fatalf("%s v%d: decoded differently", kmsg.NameForKey(tc.req.Key()), v)
		}
		if _, err := DecodeResponse(tc.req, 43, frame); err == nil {
			t.Fatal("a wrong correlation id was accepted")
		}
	}
	if _, _, err := ReadFrame(bytes.NewReader([]byte{0, 0, 0, 9, 1}), nil, 4, 8); err == nil {
		t.Fatal("a frame over the maximum was read")
	}
	if _, _, err := ReadFrame(bytes.NewReader([]byte{0xff, 0xff, 0xff, 0xff}), nil, 4, 8); err == nil {
		t.Fatal("a negative frame size was read")
	}
}

// TestReadFrameGrowsGeometrically: frames that each exceed the one before
// by a little take a new buffer only a logarithmic number of times (a
// follower's fetch responses), never past the maximum frame size.
func TestReadFrameGrowsGeometrically(t *testing.T) {
	var in []byte
	const frames = 1000
	for i := range frames {
		n := 4 + 100*i
		in = binary.BigEndian.AppendUint32(in, uint32(n))
		in = append(in, make([]byte, n)...)
	}
	r := bytes.NewReader(in)
	var buf []byte
	grown := 0
	for i := range frames {
		frame, next, err := ReadFrame(r, buf, 4, 200_000)
		if err != nil {
			t.Fatal(err)
		}
		if len(frame) != 4+100*i {
			t.Fatalf("frame %d: %d bytes", i, len(frame))
		}
		if cap(next) > 200_000 {
			t.Fatalf("frame %d: buffer of %d bytes, over the maximum frame size", i, cap(next))
		}
		if cap(next) != cap(buf) {
			grown++
		}
		buf = next
	}
	if grown > 20 {
		t.Fatalf("the buffer was replaced %d times for %d growing frames", grown, frames)
	}
}

// FuzzFraming: tagged fields and response frames from another broker never
// panic the reader, and SkipTags never returns more than it was given.
func FuzzFraming(f *testing.F) {
	f.Add([]byte{2, 0, 1, 0xaa, 5, 2, 0xbb, 0xcc, 'b'})
	f.Add([]byte{})
	f.Add(AppendResponse(nil, 1, kmsg.NewPtrFetchResponse())[4:])
	f.Fuzz(func(t *testing.T, b []byte) {
		if out, err := SkipTags(b); err == nil && len(out) > len(b) {
			t.Fatal("SkipTags grew its input")
		}
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(12)
		DecodeResponse(req, 1, b)
		req.SetVersion(4)
		DecodeResponse(req, 1, b)
	})
}
