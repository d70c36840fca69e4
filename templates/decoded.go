package templates

import (
	"net/url"
	"strconv"
)

// Decoded is a key or value in the Confluent wire format as the messages
// page shows it: the record decoded to JSON (in the writer schema's field
// order) and the schema that decoded it, or, when it did not decode, why.
type Decoded struct {
	JSON    []byte
	Subject string
	Version int
	ID      int
	Type    string // AVRO, PROTOBUF, JSON
	Message string // Protobuf: the message's full name
	// Err says why bytes that look like the wire format did not decode
	// (unknown schema id, corrupt record); the bytes are shown as they are.
	Err string
}

// ValueDecoder decodes the keys and values of the records a page shows;
// nil for bytes that are not in the wire format.
type ValueDecoder interface {
	DecodeValue(b []byte) *Decoded
}

// decoded is b decoded, nil when there is no decoder or b is not in the
// wire format.
func (o RowOptions) decoded(b []byte, null bool) *Decoded {
	if o.Decode == nil || null {
		return nil
	}
	return o.Decode.DecodeValue(b)
}

// SchemaSubjectURL is a subject's page on the Schemas pages.
func SchemaSubjectURL(subject string) string { return "/schemas/" + url.PathEscape(subject) }

// SchemaVersionURL shows version v of subject on the Schemas pages.
func SchemaVersionURL(subject string, v int) string {
	return SchemaSubjectURL(subject) + "?version=" + strconv.Itoa(v)
}
