package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/schemareg/serde"
)

// The schema registry `sluice consume --decode` reads schemas from.
const (
	schemaRegistryEnv     = "SLUICE_SCHEMA_REGISTRY"
	schemaRegistryAuthEnv = "SLUICE_SCHEMA_REGISTRY_AUTH"
	defaultSchemaRegistry = "http://localhost:8081"
)

func newSchemaDecoder(env *cliEnv, url, auth string) *serde.Decoder {
	if url == "" {
		url = env.getenv(schemaRegistryEnv)
	}
	if url == "" {
		url = defaultSchemaRegistry
	}
	if auth == "" {
		auth = env.getenv(schemaRegistryAuthEnv)
	}
	src := serde.NewHTTPSource(url, nil)
	if user, pw, ok := strings.Cut(auth, ":"); ok {
		src.User, src.Password = user, pw
	}
	return serde.NewDecoder(src)
}

type schemaRef struct {
	Subject string `json:"subject"`
	Version int    `json:"version"`
	ID      int    `json:"id"`
	Type    string `json:"type"`
}

// decodedRecordJSON is --format json with --decode: a decoded key or value
// is embedded as JSON (not as a string) and its schema is named.
type decodedRecordJSON struct {
	recordJSON
	Key         any        `json:"key"`
	Value       any        `json:"value"`
	KeySchema   *schemaRef `json:"key_schema,omitempty"`
	ValueSchema *schemaRef `json:"value_schema,omitempty"`
}

// decodingFormatter decodes wire-format keys and values before next prints
// the record. A record that does not decode is printed as it is, with a
// warning on standard error, and counted in failures.
func decodingFormatter(ctx context.Context, env *cliEnv, dec *serde.Decoder, format string,
	next func(*bufio.Writer, *kgo.Record) error, failures *int64) func(*bufio.Writer, *kgo.Record) error {
	try := func(r *kgo.Record, what string, b []byte) *serde.Decoded {
		if !serde.IsWireFormat(b) {
			return nil
		}
		d, err := dec.Decode(ctx, b)
		if err != nil {
			*failures++
			fmt.Fprintf(env.stderr, "%s[%d]@%d: %s not decoded: %v\n", r.Topic, r.Partition, r.Offset, what, err)
			return nil
		}
		return d
	}
	return func(w *bufio.Writer, r *kgo.Record) error {
		kd, vd := try(r, "key", r.Key), try(r, "value", r.Value)
		if format != "json" {
			c := *r
			if kd != nil {
				c.Key = kd.JSON
			}
			if vd != nil {
				c.Value = vd.JSON
			}
			return next(w, &c)
		}
		j := decodedRecordJSON{recordJSON: recordToJSON(r)}
		j.Key, j.Value = j.recordJSON.Key, j.recordJSON.Value
		if kd != nil {
			j.Key, j.KeySchema = json.RawMessage(kd.JSON), &schemaRef{kd.Subject, kd.Version, kd.ID, string(kd.Type)}
			j.KeyBase64 = ""
		}
		if vd != nil {
			j.Value, j.ValueSchema = json.RawMessage(vd.JSON), &schemaRef{vd.Subject, vd.Version, vd.ID, string(vd.Type)}
			j.ValueBase64 = ""
		}
		b, err := json.Marshal(j)
		if err != nil {
			return err
		}
		w.Write(b)
		return w.WriteByte('\n')
	}
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
