package migration

import (
	"context"
	"encoding/json"
	"sort"
	"time"

	"github.com/sluice-io/sluice/schemareg/serde"
)

// SchemaUse is a writer schema one side's records were decoded with.
type SchemaUse struct {
	Side    Side   `json:"side"`
	Subject string `json:"subject"`
	Version int    `json:"version"`
	ID      int    `json:"id"`
	Type    string `json:"type"`
	Records int64  `json:"records"`
}

// maxSchemaUses bounds the schemas remembered (per comparison); records
// decoded with further schemas are decoded but not listed.
const maxSchemaUses = 200

type schemaUseKey struct {
	side int
	id   int
}

type schemaUses struct {
	uses     map[schemaUseKey]*SchemaUse
	failures [2]int64
}

func (s *schemaUses) note(side int, d *serde.Decoded) {
	k := schemaUseKey{side, d.ID}
	if u := s.uses[k]; u != nil {
		u.Records++
		return
	}
	if s.uses == nil {
		s.uses = map[schemaUseKey]*SchemaUse{}
	}
	if len(s.uses) >= maxSchemaUses {
		return
	}
	s.uses[k] = &SchemaUse{Side: sideName(side), Subject: d.Subject, Version: d.Version, ID: d.ID, Type: string(d.Type), Records: 1}
}

func sideName(side int) Side {
	if side == 0 {
		return SideLeft
	}
	return SideRight
}

// list returns the uses, left before right, by subject and version.
func (s *schemaUses) list() []SchemaUse {
	if len(s.uses) == 0 {
		return nil
	}
	out := make([]SchemaUse, 0, len(s.uses))
	for _, u := range s.uses {
		out = append(out, *u)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Side != b.Side {
			return a.Side == SideLeft
		}
		if a.Subject != b.Subject {
			return a.Subject < b.Subject
		}
		return a.Version < b.Version
	})
	return out
}

type schemaUsesState struct {
	Uses     []SchemaUse `json:"uses"`
	Failures [2]int64    `json:"failures"`
}

func (s *schemaUses) state() schemaUsesState {
	return schemaUsesState{Uses: s.list(), Failures: s.failures}
}

func (s *schemaUses) restore(b []byte) error {
	var st schemaUsesState
	if err := json.Unmarshal(b, &st); err != nil {
		return err
	}
	s.failures = st.Failures
	s.uses = map[schemaUseKey]*SchemaUse{}
	for i := range st.Uses {
		u := st.Uses[i]
		side := 0
		if u.Side == SideRight {
			side = 1
		}
		s.uses[schemaUseKey{side, u.ID}] = &u
	}
	return nil
}

// decode returns the JSON of a wire-format value, noting its schema, or
// the value as it is (not in the wire format, or not decodable: counted).
func (c *Comparison) decode(core *core, side int, value []byte) []byte {
	if !serde.IsWireFormat(value) {
		return value
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	d, err := c.decoder.Decode(ctx, value)
	if err != nil {
		core.schemas.failures[side]++
		if core.schemas.failures[side] <= 3 {
			c.log.Warn("comparison: record not decoded; compared as bytes", "side", sideName(side), "err", err)
		}
		return value
	}
	core.schemas.note(side, d)
	return d.JSON
}
