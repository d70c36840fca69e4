package decompress

import (
	"bytes"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/record"
)

// TestBounded: what kgo decompresses through Decompressor comes back whole
// up to MaxBytes and is refused with kgo.ErrMaxDecompress beyond it, for
// every codec.
func TestBounded(t *testing.T) {
	small := bytes.Repeat([]byte("sluice "), 1000)
	big := make([]byte, MaxBytes+1)
	d := Decompressor()
	for _, c := range []record.Compression{record.CompressionGzip, record.CompressionSnappy, record.CompressionLZ4, record.CompressionZstd} {
		in, err := record.Compress(c, nil, small)
		if err != nil {
			t.Fatal(err)
		}
		out, err := d.Decompress(in, kgo.CompressionCodecType(c))
		if err != nil || !bytes.Equal(out, small) {
			t.Fatalf("%s: %v", c, err)
		}
		bomb, err := record.Compress(c, nil, big)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.Decompress(bomb, kgo.CompressionCodecType(c)); !errors.Is(err, kgo.ErrMaxDecompress) {
			t.Fatalf("%s: %d bytes over the bound: %v", c, len(big), err)
		}
	}
	if out, err := d.Decompress(small, kgo.CodecNone); err != nil || &out[0] != &small[0] {
		t.Fatal("uncompressed input is returned as is")
	}
}
