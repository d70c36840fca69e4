package web

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/sluice-io/sluice/schemareg/serde"
	"github.com/sluice-io/sluice/templates"
)

// RecordDecoder decodes records in the Confluent wire format (magic byte
// 0, a 4-byte schema id, the encoded record) to JSON: a *serde.Decoder
// over this host's schema registry, which caches parsed schemas by id.
type RecordDecoder interface {
	Decode(ctx context.Context, b []byte) (*serde.Decoded, error)
	// Encode encodes a JSON document with version (-1: the latest) of
	// subject (message: the Protobuf message, "" for the first) into the
	// wire format, for the produce form.
	Encode(ctx context.Context, subject string, version int, doc []byte, message string) ([]byte, *serde.Registered, error)
}

// Bounds of the decoding one page, export or live-tail batch does: the
// records are at most kafkaview.MaxLimit, and their decoded JSON at most
// decodeBudget bytes in all (the records after that are shown as they
// are, saying so).
const (
	decodeBudget    = 64 << 20
	maxDecodeReason = 160
	maxFailedIDs    = 1024
)

// pageDecoder decodes the keys and values of the records one request shows
// (templates.ValueDecoder) and searches (kafkaview.Filter.Decode). A
// schema id the source does not know is asked for once per request.
type pageDecoder struct {
	ctx context.Context
	dec RecordDecoder

	mu     sync.Mutex
	budget int            // decoded bytes left for the page; Lock mu
	failed map[int]string // schema ids not found, with the reason; Lock mu
}

// newPageDecoder returns nil when dec is nil (no schema registry): the
// records are shown as they are.
func newPageDecoder(ctx context.Context, dec RecordDecoder) *pageDecoder {
	if dec == nil {
		return nil
	}
	return &pageDecoder{ctx: ctx, dec: dec, budget: decodeBudget, failed: map[int]string{}}
}

// rowDecoder is d as the templates take it (a nil interface for nil d).
func (d *pageDecoder) rowDecoder() templates.ValueDecoder {
	if d == nil {
		return nil
	}
	return d
}

// DecodeValue decodes b when it is in the wire format (nil otherwise).
func (d *pageDecoder) DecodeValue(b []byte) *templates.Decoded {
	if d == nil || !serde.IsWireFormat(b) {
		return nil
	}
	id, _, _ := serde.Header(b)
	d.mu.Lock()
	reason, failed := d.failed[id]
	spent := d.budget <= 0
	d.mu.Unlock()
	if failed {
		return &templates.Decoded{Err: reason}
	}
	if spent {
		return &templates.Decoded{Err: "this page decoded its limit of " + templates.BytesText(int64(decodeBudget)) + " already"}
	}
	dec, err := d.dec.Decode(d.ctx, b)
	if err != nil {
		reason := decodeReason(id, err)
		if errors.Is(err, serde.ErrNotFound) {
			d.remember(id, reason)
		}
		return &templates.Decoded{Err: reason}
	}
	d.mu.Lock()
	d.budget -= len(dec.JSON)
	d.mu.Unlock()
	return &templates.Decoded{JSON: dec.JSON, Subject: dec.Subject, Version: dec.Version, ID: dec.ID, Type: string(dec.Type), Message: dec.Message}
}

// text is b decoded to JSON for a search, nil when b is not in the wire
// format or does not decode (then its bytes are searched). A search is
// bounded by its scan count and time, not by the page's budget.
func (d *pageDecoder) text(b []byte) []byte {
	if !serde.IsWireFormat(b) {
		return nil
	}
	id, _, _ := serde.Header(b)
	d.mu.Lock()
	_, failed := d.failed[id]
	d.mu.Unlock()
	if failed {
		return nil
	}
	dec, err := d.dec.Decode(d.ctx, b)
	if err != nil {
		if errors.Is(err, serde.ErrNotFound) {
			d.remember(id, decodeReason(id, err))
		}
		return nil
	}
	return dec.JSON
}

// remember notes an unknown schema id (at most maxFailedIDs: a long tail
// of random bytes cannot grow the map without bound).
func (d *pageDecoder) remember(id int, reason string) {
	d.mu.Lock()
	if len(d.failed) >= maxFailedIDs {
		clear(d.failed)
	}
	d.failed[id] = reason
	d.mu.Unlock()
}

// searchDecode is the filter's Decode for d (nil for nil d).
func (d *pageDecoder) searchDecode() func([]byte) []byte {
	if d == nil {
		return nil
	}
	return d.text
}

// decodeReason says briefly why a record did not decode.
func decodeReason(id int, err error) string {
	if errors.Is(err, serde.ErrNotFound) {
		return fmt.Sprintf("schema id %d is not in the registry", id)
	}
	s := err.Error()
	if len(s) > maxDecodeReason {
		s = strings.ToValidUTF8(s[:maxDecodeReason], "") + "…"
	}
	return s
}
