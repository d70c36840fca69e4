package record

import "testing"

// Internals the external tests (package record_test) reach.
var (
	DecodeRecord = decodeRecord
	XerialMagic  = xerialMagic
)

// LowerDecompressLimit lowers the decompression limit for the rest of a
// fuzz run (see maxDecompressedSize) and returns it.
func LowerDecompressLimit(f *testing.F) int {
	old := maxDecompressedSize
	maxDecompressedSize = 1 << 20
	f.Cleanup(func() { maxDecompressedSize = old })
	return maxDecompressedSize
}
