package serde

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/sluice-io/sluice/schemareg/schema"
)

// maxMessageIndexes bounds the message-index array (a message nested that
// deep does not exist in practice).
const maxMessageIndexes = 64

// readIndexes reads the message-index array after the header: a zigzag
// varint count, then that many zigzag varint indexes; a count of 0 means
// [0], the first message (the common case in one byte).
func readIndexes(b []byte) ([]int, []byte, error) {
	zz := func() (int64, error) {
		v, n := binary.Varint(b)
		if n <= 0 {
			return 0, errors.New("message indexes: bad varint")
		}
		b = b[n:]
		return v, nil
	}
	n, err := zz()
	if err != nil {
		return nil, nil, err
	}
	if n == 0 {
		return []int{0}, b, nil
	}
	if n < 0 || n > maxMessageIndexes {
		return nil, nil, fmt.Errorf("message indexes: count %d out of range", n)
	}
	idx := make([]int, n)
	for i := range idx {
		v, err := zz()
		if err != nil {
			return nil, nil, err
		}
		if v < 0 || v > 1<<20 {
			return nil, nil, fmt.Errorf("message index %d out of range", v)
		}
		idx[i] = int(v)
	}
	return idx, b, nil
}

func appendIndexes(dst []byte, idx []int) []byte {
	if len(idx) == 1 && idx[0] == 0 {
		return append(dst, 0)
	}
	dst = binary.AppendVarint(dst, int64(len(idx)))
	for _, i := range idx {
		dst = binary.AppendVarint(dst, int64(i))
	}
	return dst
}

func protoToJSON(s *schema.Schema, payload []byte, limit int) ([]byte, string, error) {
	idx, rest, err := readIndexes(payload)
	if err != nil {
		return nil, "", err
	}
	md, err := s.MessageByIndexes(idx)
	if err != nil {
		return nil, "", err
	}
	msg := dynamicpb.NewMessage(md)
	if err := (proto.UnmarshalOptions{RecursionLimit: maxDepth}).Unmarshal(rest, msg); err != nil {
		return nil, "", fmt.Errorf("protobuf %s: %w", md.FullName(), err)
	}
	out, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(msg)
	if err != nil {
		return nil, "", fmt.Errorf("protobuf %s to JSON: %w", md.FullName(), err)
	}
	// protojson adds random spaces on purpose: compact for stable output.
	var b bytes.Buffer
	if err := json.Compact(&b, out); err != nil {
		return nil, "", err
	}
	if b.Len() > limit {
		return nil, "", fmt.Errorf("decoded record larger than %d bytes", limit)
	}
	return b.Bytes(), string(md.FullName()), nil
}

func jsonToProto(dst []byte, s *schema.Schema, doc []byte, message string) ([]byte, error) {
	idx, md, err := s.MessageIndexes(message)
	if err != nil {
		return nil, err
	}
	msg := dynamicpb.NewMessage(md)
	if err := (protojson.UnmarshalOptions{}).Unmarshal(doc, msg); err != nil {
		return nil, fmt.Errorf("protobuf %s from JSON: %w", md.FullName(), err)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
	if err != nil {
		return nil, err
	}
	dst = appendIndexes(dst, idx)
	return append(dst, b...), nil
}

func jsonPayload(payload []byte, limit int) ([]byte, error) {
	if len(payload) > limit {
		return nil, fmt.Errorf("record larger than %d bytes", limit)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, payload); err != nil {
		return nil, fmt.Errorf("the payload is not JSON: %w", err)
	}
	return b.Bytes(), nil
}

func jsonToJSON(dst []byte, s *schema.Schema, doc []byte) ([]byte, error) {
	var b bytes.Buffer
	if err := json.Compact(&b, doc); err != nil {
		return nil, fmt.Errorf("the document is not JSON: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b.Bytes()))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if err := s.Validate(v); err != nil {
		return nil, fmt.Errorf("the document does not match the schema: %w", err)
	}
	return append(dst, b.Bytes()...), nil
}
