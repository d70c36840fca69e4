package schema

import (
	"errors"
	"fmt"
	"math/big"
	"slices"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

type jsonSchema struct {
	compiled *jsonschema.Schema
	doc      any // the parsed document, for the compatibility rules
	refs     map[string]any
}

// JSONSchema returns the compiled JSON Schema (nil for another type), for
// validating documents.
func (s *Schema) JSONSchema() *jsonschema.Schema {
	if s.json == nil {
		return nil
	}
	return s.json.compiled
}

// noLoader refuses every URL that was not added as a resource: a schema's
// $ref must never make the registry read a file or the network.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("$ref %q is not among the schema's references", url)
}

const mainJSONURL = "sluice:///schema.json"

func parseJSONSchema(src Source) (*Schema, error) {
	text := Canonical(JSON, src.Text)
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return nil, invalid("json schema: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	refs := map[string]any{}
	if err := addJSONRefs(c, refs, src.References); err != nil {
		return nil, err
	}
	if err := c.AddResource(mainJSONURL, doc); err != nil {
		return nil, invalid("json schema: %v", err)
	}
	sch, err := c.Compile(mainJSONURL)
	if err != nil {
		return nil, invalid("json schema: %v", err)
	}
	return &Schema{Type: JSON, Text: text, json: &jsonSchema{compiled: sch, doc: doc, refs: refs}}, nil
}

func addJSONRefs(c *jsonschema.Compiler, refs map[string]any, rs []Resolved) error {
	for _, r := range rs {
		if r.Type != "" && r.Type != JSON {
			return invalid("json schema reference %q is a %s schema", r.Name, r.Type)
		}
		if _, ok := refs[r.Name]; ok {
			continue
		}
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(r.Text))
		if err != nil {
			return invalid("json schema reference %q: %v", r.Name, err)
		}
		refs[r.Name] = doc
		// A relative name resolves against the main schema's URL.
		u := r.Name
		if !strings.Contains(u, ":") {
			u = "sluice:///" + strings.TrimPrefix(u, "/")
		}
		if err := c.AddResource(u, doc); err != nil {
			return invalid("json schema reference %q: %v", r.Name, err)
		}
		if err := addJSONRefs(c, refs, r.References); err != nil {
			return err
		}
	}
	return nil
}

// Validate checks a JSON document (already parsed with encoding/json's
// UseNumber or jsonschema.UnmarshalJSON) against a JSON schema.
func (s *Schema) Validate(doc any) error {
	if s.json == nil {
		return errors.New("not a JSON schema")
	}
	return s.json.compiled.Validate(doc)
}

// The JSON Schema rules: a subset of Confluent's (its json-schema-provider
// diff package), checked on the schema documents for the reader (the update
// in a backward check) against the writer (the original):
//
//   - type: the reader must accept every type the writer allows ("integer"
//     is read by "number"); a narrowed or changed type is incompatible.
//   - properties: a property added to a reader whose writer was open
//     (additionalProperties not false) is incompatible unless its schema is
//     empty (old data may hold anything under that name); added to a
//     closed writer it is compatible unless required without a default. A
//     property removed is compatible when the reader is open, incompatible
//     when it is closed (old data holds it).
//   - additionalProperties: opening a closed model is compatible, closing an
//     open one is not.
//   - required: a property newly required (without a default) is
//     incompatible; one no longer required is compatible.
//   - enum: removing values is incompatible, adding is compatible.
//   - maxLength, maxItems, maximum lowered, minLength, minItems, minimum
//     raised: incompatible (narrowed); the reverse is compatible.
//   - items and property schemas are compared recursively.
func jsonCompatible(reader, writer *Schema) []string {
	d := &jsonDiff{rRefs: reader.json.refs, wRefs: writer.json.refs, rRoot: reader.json.doc, wRoot: writer.json.doc}
	d.compare("#", writer.json.doc, reader.json.doc, 0)
	return d.msgs
}

type jsonDiff struct {
	msgs         []string
	rRefs, wRefs map[string]any
	rRoot, wRoot any // the documents, for local "#/..." references
}

func (d *jsonDiff) add(path, format string, args ...any) {
	if len(d.msgs) < 100 {
		d.msgs = append(d.msgs, path+": "+fmt.Sprintf(format, args...))
	}
}

// deref follows a $ref into the references (or the same document's
// definitions) one level; other schemas are returned as they are.
func deref(s any, refs map[string]any, root any) any {
	m, ok := s.(map[string]any)
	if !ok {
		return s
	}
	ref, ok := m["$ref"].(string)
	if !ok {
		return s
	}
	if strings.HasPrefix(ref, "#/") {
		cur := root
		for _, part := range strings.Split(ref[2:], "/") {
			cm, ok := cur.(map[string]any)
			if !ok {
				return s
			}
			cur = cm[strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")]
		}
		if cur != nil {
			return cur
		}
		return s
	}
	if doc, ok := refs[ref]; ok {
		return doc
	}
	return s
}

func typesOf(m map[string]any) []string {
	switch t := m["type"].(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, v := range t {
			if s, ok := v.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil // any type
}

func isOpen(m map[string]any) bool {
	if ap, ok := m["additionalProperties"]; ok {
		if b, ok := ap.(bool); ok && !b {
			return false
		}
	}
	if ap, ok := m["unevaluatedProperties"]; ok {
		if b, ok := ap.(bool); ok && !b {
			return false
		}
	}
	return true
}

func isEmptySchema(s any) bool {
	switch v := s.(type) {
	case bool:
		return v
	case map[string]any:
		for k := range v {
			if k != "description" && k != "title" && k != "$comment" {
				return false
			}
		}
		return true
	}
	return false
}

func stringSet(v any) map[string]bool {
	out := map[string]bool{}
	if a, ok := v.([]any); ok {
		for _, x := range a {
			if s, ok := x.(string); ok {
				out[s] = true
			}
		}
	}
	return out
}

func number(v any) (*big.Float, bool) {
	switch n := v.(type) {
	case fmt.Stringer: // json.Number from jsonschema.UnmarshalJSON
		f, ok := new(big.Float).SetString(n.String())
		return f, ok
	case float64:
		return big.NewFloat(n), true
	}
	return nil, false
}

func (d *jsonDiff) compare(path string, w, r any, depth int) {
	if depth > 64 {
		return
	}
	w = deref(w, d.wRefs, d.wRoot)
	r = deref(r, d.rRefs, d.rRoot)
	if rb, ok := r.(bool); ok {
		if !rb {
			if wb, ok := w.(bool); !ok || wb {
				d.add(path, "the new schema accepts nothing")
			}
		}
		return
	}
	wm, _ := w.(map[string]any)
	rm, _ := r.(map[string]any)
	if rm == nil {
		return
	}
	if wm == nil {
		if wb, ok := w.(bool); ok && !wb {
			return // the writer wrote nothing
		}
		if !isEmptySchema(rm) {
			d.add(path, "the old schema accepted anything; the new one constrains it")
		}
		return
	}
	// type
	wt, rt := typesOf(wm), typesOf(rm)
	if rt != nil {
		if wt == nil {
			d.add(path, "type %v narrowed from any type", rt)
		} else {
			for _, t := range wt {
				if !slices.Contains(rt, t) && !(t == "integer" && slices.Contains(rt, "number")) {
					d.add(path, "type changed from %v to %v", wt, rt)
					break
				}
			}
		}
	}
	// enum
	if re, ok := rm["enum"]; ok {
		rs := fmt.Sprint(re)
		we, wok := wm["enum"]
		if !wok {
			d.add(path, "enum added")
		} else if fmt.Sprint(we) != rs {
			rv := re.([]any)
			for _, v := range we.([]any) {
				if !slices.ContainsFunc(rv, func(x any) bool { return fmt.Sprint(x) == fmt.Sprint(v) }) {
					d.add(path, "enum value %v removed", v)
				}
			}
		}
	}
	// bounds: narrowed is incompatible
	for _, k := range []string{"maxLength", "maxItems", "maxProperties", "maximum", "exclusiveMaximum"} {
		rv, rok := number(rm[k])
		if !rok {
			continue
		}
		wv, wok := number(wm[k])
		if !wok || rv.Cmp(wv) < 0 {
			d.add(path, "%s narrowed", k)
		}
	}
	for _, k := range []string{"minLength", "minItems", "minProperties", "minimum", "exclusiveMinimum"} {
		rv, rok := number(rm[k])
		if !rok {
			continue
		}
		wv, wok := number(wm[k])
		if !wok || rv.Cmp(wv) > 0 {
			d.add(path, "%s narrowed", k)
		}
	}
	// objects
	wp, _ := wm["properties"].(map[string]any)
	rp, _ := rm["properties"].(map[string]any)
	wOpen, rOpen := isOpen(wm), isOpen(rm)
	if wOpen && !rOpen {
		d.add(path, "additionalProperties removed (the content model was closed)")
	}
	wReq, rReq := stringSet(wm["required"]), stringSet(rm["required"])
	names := make([]string, 0, len(wp)+len(rp))
	for k := range wp {
		names = append(names, k)
	}
	for k := range rp {
		if _, ok := wp[k]; !ok {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		p := path + "/properties/" + name
		ws, inW := wp[name]
		rs, inR := rp[name]
		switch {
		case inW && !inR:
			if !rOpen {
				d.add(p, "property removed from a closed content model")
			}
		case !inW && inR:
			hasDefault := false
			if m, ok := rs.(map[string]any); ok {
				_, hasDefault = m["default"]
			}
			if wOpen {
				if !isEmptySchema(rs) {
					d.add(p, "property added to an open content model")
				}
			} else if rReq[name] && !hasDefault {
				d.add(p, "required property added")
			}
		default:
			d.compare(p, ws, rs, depth+1)
		}
	}
	for name := range rReq {
		if wReq[name] {
			continue
		}
		if _, added := wp[name]; !added {
			if _, inR := rp[name]; inR {
				continue // reported with the added property
			}
		}
		hasDefault := false
		if m, ok := rp[name].(map[string]any); ok {
			_, hasDefault = m["default"]
		}
		if !hasDefault {
			d.add(path+"/required", "property %s is now required", name)
		}
	}
	// arrays
	if wi, ok := wm["items"]; ok {
		if ri, ok := rm["items"]; ok {
			d.compare(path+"/items", wi, ri, depth+1)
		}
	} else if ri, ok := rm["items"]; ok && !isEmptySchema(ri) {
		d.add(path+"/items", "items constrained")
	}
}
