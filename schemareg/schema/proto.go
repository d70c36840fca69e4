package schema

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/bufbuild/protocompile"
	"github.com/bufbuild/protocompile/reporter"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

type protoSchema struct {
	fd protoreflect.FileDescriptor
}

// Proto returns the parsed .proto file (nil for another type).
func (s *Schema) Proto() protoreflect.FileDescriptor {
	if s.proto == nil {
		return nil
	}
	return s.proto.fd
}

// mainProtoName is the file name the schema itself is compiled under; its
// references are compiled under their reference names (the import paths).
const mainProtoName = "__schema__.proto"

// parseProto compiles .proto text with its references as imports (and the
// well-known google/protobuf/*.proto files). A schema that is not .proto
// text but the base64 of a serialized FileDescriptorProto (what some
// serializers register) is accepted too, as Confluent's registry does.
func parseProto(src Source) (*Schema, error) {
	files := map[string]string{}
	if err := addProtoRefs(files, src.References, 0); err != nil {
		return nil, err
	}
	text := src.Text
	if fd, ok := protoFromDescriptor(text, files); ok {
		return &Schema{Type: Protobuf, Text: text, proto: &protoSchema{fd: fd}}, nil
	}
	for name, src := range files {
		if err := checkProtoNesting(src); err != nil {
			return nil, invalid("protobuf reference %q: %v", name, err)
		}
	}
	if err := checkProtoNesting(text); err != nil {
		return nil, invalid("protobuf: %v", err)
	}
	files[mainProtoName] = text
	var errs []string
	c := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
			Accessor: protocompile.SourceAccessorFromMap(files),
		}),
		Reporter: reporter.NewReporter(func(err reporter.ErrorWithPos) error {
			if len(errs) < 10 {
				errs = append(errs, err.Error())
			}
			return nil
		}, nil),
	}
	out, err := c.Compile(context.Background(), mainProtoName)
	if err != nil {
		if len(errs) > 0 {
			return nil, invalid("protobuf: %s", strings.ReplaceAll(strings.Join(errs, "; "), mainProtoName+":", "line "))
		}
		var pe protocompile.PanicError
		if errors.As(err, &pe) {
			return nil, invalid("protobuf: %v", pe)
		}
		return nil, invalid("protobuf: %v", err)
	}
	return &Schema{Type: Protobuf, Text: text, proto: &protoSchema{fd: out[0]}}, nil
}

// maxProtoNesting bounds how deep blocks ({...}) nest in .proto text: the
// compiler walks nested declarations recursively, and a hostile schema of
// a few megabytes of "message A {" would otherwise exhaust the stack.
const maxProtoNesting = 100

func checkProtoNesting(text string) error {
	depth := 0
	for i := 0; i < len(text); i++ {
		switch c := text[i]; c {
		case '"', '\'':
			for i++; i < len(text) && text[i] != c && text[i] != '\n'; i++ {
				if text[i] == '\\' {
					i++
				}
			}
		case '/':
			if i+1 < len(text) && text[i+1] == '/' {
				for i < len(text) && text[i] != '\n' {
					i++
				}
			} else if i+1 < len(text) && text[i+1] == '*' {
				end := strings.Index(text[i+2:], "*/")
				if end < 0 {
					return nil // unterminated: the compiler reports it
				}
				i += end + 3
			}
		case '{', '<', '[':
			if depth++; depth > maxProtoNesting {
				return fmt.Errorf("declarations nest deeper than %d", maxProtoNesting)
			}
		case '}', '>', ']':
			depth--
		}
	}
	return nil
}

func addProtoRefs(files map[string]string, refs []Resolved, depth int) error {
	for _, r := range refs {
		if r.Type != "" && r.Type != Protobuf {
			return invalid("protobuf reference %q is a %s schema", r.Name, r.Type)
		}
		if _, ok := files[r.Name]; ok {
			continue
		}
		files[r.Name] = r.Text
		if err := addProtoRefs(files, r.References, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// protoFromDescriptor reads a base64 FileDescriptorProto whose imports are
// among files (compiled first) or well-known types.
func protoFromDescriptor(text string, files map[string]string) (protoreflect.FileDescriptor, bool) {
	t := strings.TrimSpace(text)
	if t == "" || strings.ContainsAny(t, " \n\t{;") {
		return nil, false
	}
	raw, err := base64.StdEncoding.DecodeString(t)
	if err != nil {
		return nil, false
	}
	var fdp descriptorpb.FileDescriptorProto
	if proto.Unmarshal(raw, &fdp) != nil || fdp.GetName() == "" && len(fdp.MessageType) == 0 {
		return nil, false
	}
	res := &protoregistry.Files{}
	if len(fdp.Dependency) > 0 {
		c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
			Accessor: protocompile.SourceAccessorFromMap(files),
		})}
		deps, err := c.Compile(context.Background(), fdp.Dependency...)
		if err != nil {
			return nil, false
		}
		for _, d := range deps {
			if res.RegisterFile(d) != nil {
				return nil, false
			}
			for i := 0; i < d.Imports().Len(); i++ {
				_ = res.RegisterFile(d.Imports().Get(i).FileDescriptor)
			}
		}
	}
	fd, err := protodesc.NewFile(&fdp, res)
	if err != nil {
		return nil, false
	}
	return fd, true
}

// The Protobuf rules are Confluent's (its protobuf-provider diff package):
// fields are matched by number, messages and enums by full name. These
// changes are compatible: message, enum, enum value, field, oneof or oneof
// member added; enum or enum value removed or renamed; field removed (its
// number becomes unknown data) or renamed; string <-> bytes; a oneof member
// moved to the top level. Everything else found is not: package changed,
// message removed, a field's kind (scalar, message, map) or scalar group
// changed (int32/int64/uint32/uint64/bool/enum are one group; sint32/sint64;
// fixed32/sfixed32; fixed64/sfixed64; float; double; string/bytes), a field
// of another message type, a numeric field's label (optional/repeated)
// changed, a required field added or removed, a oneof member removed, or
// fields that were independent moved into one oneof. So a field renumbered
// onto a fresh number is compatible (old data's field is skipped as
// unknown), and one renumbered onto another field's number of another type
// is not.
func protoCompatible(reader, writer *Schema) []string {
	// Confluent compares (original, update) = (writer's version, reader's)
	// for a backward check: the update must read the original's data.
	d := &protoDiff{}
	o, u := writer.proto.fd, reader.proto.fd
	if o.Package() != u.Package() {
		d.add("", "package changed from %q to %q", o.Package(), u.Package())
	}
	d.compareMessages("", o.Messages(), u.Messages())
	return d.msgs
}

type protoDiff struct {
	msgs  []string
	depth int
}

func (d *protoDiff) add(path, format string, args ...any) {
	if len(d.msgs) >= 100 {
		return
	}
	m := fmt.Sprintf(format, args...)
	if path != "" {
		m = path + ": " + m
	}
	d.msgs = append(d.msgs, m)
}

func (d *protoDiff) compareMessages(path string, o, u protoreflect.MessageDescriptors) {
	byName := func(ms protoreflect.MessageDescriptors) map[protoreflect.Name]protoreflect.MessageDescriptor {
		m := map[protoreflect.Name]protoreflect.MessageDescriptor{}
		for i := 0; i < ms.Len(); i++ {
			if !ms.Get(i).IsMapEntry() {
				m[ms.Get(i).Name()] = ms.Get(i)
			}
		}
		return m
	}
	om, um := byName(o), byName(u)
	for _, name := range sortedNames(om) {
		p := join(path, string(name))
		if un, ok := um[name]; !ok {
			d.add(p, "message removed")
		} else {
			d.compareMessage(p, om[name], un)
		}
	}
}

func sortedNames[V any](m map[protoreflect.Name]V) []protoreflect.Name {
	out := make([]protoreflect.Name, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func (d *protoDiff) compareMessage(path string, o, u protoreflect.MessageDescriptor) {
	d.depth++
	defer func() { d.depth-- }()
	if d.depth > 64 {
		return
	}
	of, uf := o.Fields(), u.Fields()
	oneofOf := func(f protoreflect.FieldDescriptor) string {
		if oo := f.ContainingOneof(); oo != nil && !oo.IsSynthetic() {
			return string(oo.Name())
		}
		return ""
	}
	// Oneofs of the update whose pre-existing members came from more than
	// one group of the original: newly exclusive fields.
	for i := 0; i < u.Oneofs().Len(); i++ {
		oo := u.Oneofs().Get(i)
		if oo.IsSynthetic() {
			continue
		}
		groups := map[string]bool{}
		topMoved := 0
		for j := 0; j < oo.Fields().Len(); j++ {
			f := oo.Fields().Get(j)
			old := of.ByNumber(f.Number())
			if old == nil {
				continue
			}
			if g := oneofOf(old); g != "" {
				groups["oneof:"+g] = true
			} else {
				groups[fmt.Sprint("field:", f.Number())] = true
				topMoved++
			}
		}
		if len(groups) > 1 {
			if topMoved > 1 {
				d.add(join(path, string(oo.Name())), "several existing fields moved into a oneof")
			} else {
				d.add(join(path, string(oo.Name())), "an existing field moved into an existing oneof")
			}
		}
	}
	// Oneofs removed with none of their members left are complete
	// deletions (compatible); a member dropped from a surviving one is not.
	deleted := map[string]bool{}
	for i := 0; i < o.Oneofs().Len(); i++ {
		oo := o.Oneofs().Get(i)
		if oo.IsSynthetic() || u.Oneofs().ByName(oo.Name()) != nil {
			continue
		}
		survives := false
		for j := 0; j < oo.Fields().Len(); j++ {
			if uf.ByNumber(oo.Fields().Get(j).Number()) != nil {
				survives = true
			}
		}
		if !survives {
			deleted[string(oo.Name())] = true
		}
	}
	for i := 0; i < of.Len(); i++ {
		f := of.Get(i)
		p := join(path, fmt.Sprint(f.Number()))
		nf := uf.ByNumber(f.Number())
		if nf == nil {
			if g := oneofOf(f); g != "" {
				if !deleted[g] {
					d.add(p, "field %s removed from oneof %s", f.Name(), g)
				}
			} else if f.Cardinality() == protoreflect.Required {
				d.add(p, "required field %s removed", f.Name())
			}
			continue
		}
		d.compareField(p, f, nf)
	}
	for i := 0; i < uf.Len(); i++ {
		f := uf.Get(i)
		if of.ByNumber(f.Number()) == nil && f.Cardinality() == protoreflect.Required && oneofOf(f) == "" {
			d.add(join(path, fmt.Sprint(f.Number())), "required field %s added", f.Name())
		}
	}
	d.compareMessages(path, o.Messages(), u.Messages())
}

type fieldKind int

const (
	kindScalar fieldKind = iota
	kindMap
	kindMessage
)

func kindOf(f protoreflect.FieldDescriptor) fieldKind {
	switch {
	case f.IsMap():
		return kindMap
	case f.Kind() == protoreflect.MessageKind || f.Kind() == protoreflect.GroupKind:
		return kindMessage
	}
	return kindScalar
}

func scalarGroup(k protoreflect.Kind) string {
	switch k {
	case protoreflect.Int32Kind, protoreflect.Int64Kind, protoreflect.Uint32Kind, protoreflect.Uint64Kind, protoreflect.BoolKind, protoreflect.EnumKind:
		return "general number"
	case protoreflect.Sint32Kind, protoreflect.Sint64Kind:
		return "signed number"
	case protoreflect.StringKind, protoreflect.BytesKind:
		return "string or bytes"
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind:
		return "fixed32"
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind:
		return "fixed64"
	case protoreflect.FloatKind:
		return "float"
	case protoreflect.DoubleKind:
		return "double"
	}
	return k.String()
}

func (d *protoDiff) compareField(path string, o, u protoreflect.FieldDescriptor) {
	if o.IsMap() && u.IsMap() {
		d.compareTypes(path+".key", o.MapKey(), u.MapKey(), false)
		d.compareTypes(path+".value", o.MapValue(), u.MapValue(), false)
		return
	}
	d.compareTypes(path, o, u, true)
}

func (d *protoDiff) compareTypes(path string, o, u protoreflect.FieldDescriptor, labels bool) {
	ok, uk := kindOf(o), kindOf(u)
	if ok != uk {
		d.add(path, "field %s changed kind (scalar, message or map)", u.Name())
		return
	}
	switch ok {
	case kindScalar:
		og, ug := scalarGroup(o.Kind()), scalarGroup(u.Kind())
		if og != ug {
			d.add(path, "field %s changed type from %s to %s", u.Name(), o.Kind(), u.Kind())
			return
		}
		if labels && o.IsList() != u.IsList() && og != "string or bytes" {
			d.add(path, "field %s changed between repeated and singular", u.Name())
		}
	case kindMessage:
		on, un := o.Message().FullName(), u.Message().FullName()
		if localName(o.Message()) != localName(u.Message()) {
			d.add(path, "field %s changed type from %s to %s", u.Name(), on, un)
			return
		}
		// Same local name: compare the two messages where they differ in
		// file (a nested comparison is how Confluent follows references).
		if o.Message().ParentFile().Path() != u.Message().ParentFile().Path() || o.Message().ParentFile().Package() != u.Message().ParentFile().Package() {
			sub := &protoDiff{depth: d.depth}
			sub.compareMessage(path, o.Message(), u.Message())
			if len(sub.msgs) > 0 {
				d.msgs = append(d.msgs, sub.msgs...)
				d.add(path, "field %s changed type", u.Name())
			}
		}
	}
}

func localName(m protoreflect.MessageDescriptor) string {
	full := string(m.FullName())
	pkg := string(m.ParentFile().Package())
	if pkg != "" {
		return strings.TrimPrefix(full, pkg+".")
	}
	return full
}

// MessageByIndexes returns the message that a Confluent message-index path
// names: the i-th top-level message, then its j-th nested message, ...
func (s *Schema) MessageByIndexes(idx []int) (protoreflect.MessageDescriptor, error) {
	fd := s.Proto()
	if fd == nil {
		return nil, errors.New("not a protobuf schema")
	}
	if len(idx) == 0 {
		idx = []int{0}
	}
	msgs := fd.Messages()
	var m protoreflect.MessageDescriptor
	for _, i := range idx {
		if i < 0 || i >= msgs.Len() {
			return nil, fmt.Errorf("message index %v: the schema has no such message", idx)
		}
		m = msgs.Get(i)
		msgs = m.Messages()
	}
	return m, nil
}

// MessageIndexes returns the index path of the message with the given full
// name (or of the first message when name is empty).
func (s *Schema) MessageIndexes(name string) ([]int, protoreflect.MessageDescriptor, error) {
	fd := s.Proto()
	if fd == nil {
		return nil, nil, errors.New("not a protobuf schema")
	}
	if fd.Messages().Len() == 0 {
		return nil, nil, errors.New("the schema declares no message")
	}
	if name == "" {
		return []int{0}, fd.Messages().Get(0), nil
	}
	var find func(ms protoreflect.MessageDescriptors, path []int) ([]int, protoreflect.MessageDescriptor)
	find = func(ms protoreflect.MessageDescriptors, path []int) ([]int, protoreflect.MessageDescriptor) {
		for i := 0; i < ms.Len(); i++ {
			m := ms.Get(i)
			p := append(append([]int(nil), path...), i)
			if string(m.FullName()) == name || string(m.Name()) == name {
				return p, m
			}
			if r, md := find(m.Messages(), p); md != nil {
				return r, md
			}
		}
		return nil, nil
	}
	p, m := find(fd.Messages(), nil)
	if m == nil {
		return nil, nil, fmt.Errorf("the schema has no message %q", name)
	}
	return p, m, nil
}
