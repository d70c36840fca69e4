// Package kwire is Kafka's framing around the bodies kmsg encodes and
// decodes, written once for both ends of a connection: package protocol (the
// server) and the broker's own clients (the replica fetcher, the
// controlled-shutdown request to the controller).
//
//   - A frame is a 4-byte big-endian size, then that many bytes.
//   - A request header is v1 (api key, version, correlation id, client id)
//     or, for a flexible version, v2: v1 and a tagged-field section.
//     kmsg.RequestFormatter writes them; package protocol reads them.
//   - A response header is v0 (the correlation id) or, for a flexible
//     version, v1: v0 and a tagged-field section. ApiVersions is the
//     exception: its response header is always v0, so that a client can
//     read the answer whatever version it asked for (KIP-511).
//   - A tagged-field section is a uvarint count, then for each field a
//     uvarint tag, a uvarint size and that many bytes. Sluice writes none in
//     headers and skips those it reads.
package kwire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// SkipTags skips a tagged-field section at the start of b and returns what
// follows it.
func SkipTags(b []byte) ([]byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, errors.New("bad tagged fields count")
	}
	b = b[k:]
	for range n {
		if _, k = binary.Uvarint(b); k <= 0 {
			return nil, errors.New("bad tag")
		}
		b = b[k:]
		size, k := binary.Uvarint(b)
		if k <= 0 || size > uint64(len(b)-k) {
			return nil, errors.New("bad tag size")
		}
		b = b[k+int(size):]
	}
	return b, nil
}

// ResponseHeaderTags reports whether the response header of API key at a
// version that is flexible or not carries a tagged-field section (header
// v1): flexible versions but ApiVersions'.
func ResponseHeaderTags(key int16, flexible bool) bool { return flexible && key != 18 }

// AppendResponse appends resp framed: the size, the correlation id, the
// response header's empty tag section where it has one, then the body.
func AppendResponse(dst []byte, corr int32, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(corr))
	if ResponseHeaderTags(resp.Key(), resp.IsFlexible()) {
		dst = append(dst, 0)
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// ReadFrame reads one frame from r: its size, then its bytes into buf,
// grown when it is too small. A frame shorter than minSize or longer than
// maxSize is an error before anything more is read. It returns the frame
// and buf (to reuse for the next).
//
// buf grows at least twofold (up to maxSize): a reader of frames of varying
// sizes, such as a replica fetcher reading fetch responses of a few hundred
// kilobytes to a few megabytes, settles on one buffer after a few frames.
// Grown to each frame's exact size instead, it took a new buffer for every
// frame larger than all before, and the kernel faulted in each new page as
// the socket read wrote it: on a follower those faults were half of the
// broker's page faults.
func ReadFrame(r io.Reader, buf []byte, minSize, maxSize int) (frame, grown []byte, err error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, buf, err
	}
	n := int(int32(binary.BigEndian.Uint32(size[:])))
	if n < minSize || n > maxSize {
		return nil, buf, fmt.Errorf("frame of %d bytes outside [%d, %d]", n, minSize, maxSize)
	}
	if cap(buf) < n {
		buf = make([]byte, max(n, min(2*cap(buf), maxSize)))
	}
	frame = buf[:n]
	if _, err := io.ReadFull(r, frame); err != nil {
		return nil, buf, err
	}
	return frame, buf, nil
}

// DecodeResponse decodes frame (a response frame without its size) as the
// response to req, which was sent with correlation id corr. The response's
// byte slices (a fetch's records) alias frame.
func DecodeResponse(req kmsg.Request, corr int32, frame []byte) (kmsg.Response, error) {
	if len(frame) < 4 {
		return nil, fmt.Errorf("response frame of %d bytes", len(frame))
	}
	if got := int32(binary.BigEndian.Uint32(frame)); got != corr {
		return nil, fmt.Errorf("response correlation id %d, want %d", got, corr)
	}
	body := frame[4:]
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if ResponseHeaderTags(req.Key(), resp.IsFlexible()) {
		var err error
		if body, err = SkipTags(body); err != nil {
			return nil, fmt.Errorf("%s response header: %w", kmsg.NameForKey(req.Key()), err)
		}
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decode %s response: %w", kmsg.NameForKey(req.Key()), err)
	}
	return resp, nil
}
