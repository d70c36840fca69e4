// Package decompress bounds what the appliance's own Kafka clients expand:
// the console's client, the lag collector, the comparisons (and so the
// alert sources built on them). franz-go's default bound is 1 GiB per batch
// for a consumer and 2 GiB for its DefaultDecompressor, so one batch that
// claims hundreds of MiB (written before the broker checked batches on
// append, or read from another cluster) took the process's memory with it
// on the first page view or lag sample. With these bounds such a batch is an
// error for its partition (kgo.ErrDecompressTooLarge), shown as such.
package decompress

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/record"
)

// MaxBytes is what one fetched batch may decompress to in the appliance's
// own clients. A console page shows records, not 64 MiB batches; a batch
// beyond it (the broker accepts up to message.decompressed.max.bytes, 64
// MiB by default) is reported instead of shown.
const MaxBytes = 16 << 20

// ClientOpt bounds a kgo client's consumer (PollFetches) at MaxBytes.
func ClientOpt() kgo.Opt { return kgo.MaxDecompressBatchBytes(MaxBytes) }

// Decompressor is a kgo.Decompressor bounded at MaxBytes, for
// kgo.ProcessFetchPartition (raw Fetch responses). It decodes as a stream
// with pooled codec state: the output, at most MaxBytes, is all it
// allocates.
func Decompressor() kgo.Decompressor { return bounded(MaxBytes) }

type bounded int

func (b bounded) Decompress(src []byte, codec kgo.CompressionCodecType) ([]byte, error) {
	if codec == kgo.CodecNone {
		return src, nil
	}
	out, err := record.DecompressLimit(record.Compression(codec), nil, src, int(b))
	if errors.Is(err, record.ErrDecompressedTooLarge) {
		return nil, fmt.Errorf("%w (%d bytes)", kgo.ErrMaxDecompress, int(b))
	}
	return out, err
}
