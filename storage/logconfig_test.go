package storage

import (
	"strings"
	"testing"

	"github.com/sluice-io/sluice/record"
)

// TestLogConfigFromTable: the log's defaults and rules are the config
// table's: the defaults validate, the smallest index the log ever gives a
// segment is the smallest segment.index.bytes the table accepts, and every
// compression.type the table accepts has a codec here.
func TestLogConfigFromTable(t *testing.T) {
	c := DefaultLogConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.SegmentBytes != 1<<30 || c.RetentionMs != 7*24*3600*1000 || c.Cleanup != "delete" || !c.deletes() || c.compact() {
		t.Fatalf("defaults %+v", c)
	}
	c.SegmentIndexBytes = minSegmentIndexBytes
	if err := c.Validate(); err != nil {
		t.Errorf("segment.index.bytes %d: %v", minSegmentIndexBytes, err)
	}
	c.SegmentIndexBytes = minSegmentIndexBytes - 1
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "segment.index.bytes") {
		t.Errorf("segment.index.bytes %d: %v", minSegmentIndexBytes-1, err)
	}
	for _, ct := range []string{"producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"} {
		c := DefaultLogConfig()
		c.CompressionType = ct
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", ct, err)
		}
		if _, _, err := record.ParseCompressionType(ct); err != nil {
			t.Errorf("%s: %v", ct, err)
		}
	}
	c = DefaultLogConfig()
	c.Cleanup = "compact,delete"
	if !c.compact() || !c.deletes() {
		t.Error("compact,delete")
	}
	if _, _, err := parseCleanupPolicy("shred"); err == nil {
		t.Error("cleanup.policy shred accepted")
	}
	if err := validTopicName("a/b"); err == nil {
		t.Error("topic a/b accepted")
	}
}
