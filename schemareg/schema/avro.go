package schema

import (
	"github.com/hamba/avro/v2"
)

type avroSchema struct {
	s avro.Schema
}

// Avro returns the parsed Avro schema (nil for another type).
func (s *Schema) Avro() avro.Schema {
	if s.avro == nil {
		return nil
	}
	return s.avro.s
}

// parseAvro parses the references first (depth first) into one name cache,
// so that the schema can name their types. A fresh cache per parse: hamba's
// package-level cache would grow with every schema ever parsed.
func parseAvro(src Source) (*Schema, error) {
	cache := &avro.SchemaCache{}
	if err := addAvroRefs(cache, src.References, map[string]bool{}); err != nil {
		return nil, err
	}
	text := Canonical(Avro, src.Text)
	s, err := avro.ParseWithCache(text, "", cache)
	if err != nil {
		return nil, invalid("avro: %v", err)
	}
	return &Schema{Type: Avro, Text: text, avro: &avroSchema{s: s}}, nil
}

func addAvroRefs(cache *avro.SchemaCache, refs []Resolved, seen map[string]bool) error {
	for _, r := range refs {
		if seen[r.Name] {
			continue
		}
		seen[r.Name] = true
		if r.Type != "" && r.Type != Avro {
			return invalid("avro reference %q is a %s schema", r.Name, r.Type)
		}
		if err := addAvroRefs(cache, r.References, seen); err != nil {
			return err
		}
		if _, err := avro.ParseWithCache(r.Text, "", cache); err != nil {
			return invalid("avro reference %q: %v", r.Name, err)
		}
	}
	return nil
}

func avroCompatible(reader, writer *Schema) []string {
	if err := avro.NewSchemaCompatibility().Compatible(reader.avro.s, writer.avro.s); err != nil {
		return []string{err.Error()}
	}
	return nil
}
