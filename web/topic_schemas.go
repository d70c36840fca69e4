package web

import (
	"context"
	"sort"
	"strings"

	"github.com/sluice-io/sluice/kafkaview"
	"github.com/sluice-io/sluice/schemareg/serde"
	"github.com/sluice-io/sluice/templates"
)

// topicSchemaSample is how many of a topic's latest records the topic page
// decodes to find the schemas they use.
const topicSchemaSample = 20

type latestReader interface {
	Read(ctx context.Context, q kafkaview.Query) (*kafkaview.Result, error)
}

// topicSchemas finds the subjects a topic's records use: the registry's
// subjects named after the topic (TopicNameStrategy) and the subjects of
// the schema ids in its latest records (RecordNameStrategy and others).
type topicSchemas struct {
	rd       latestReader
	dec      RecordDecoder
	subjects func() []string
}

func (s topicSchemas) of(ctx context.Context, topic string) []templates.TopicSubject {
	if s.dec == nil && s.subjects == nil {
		return nil
	}
	var out []templates.TopicSubject
	index := map[string]int{} // subject+field → out index
	add := func(ts templates.TopicSubject) *templates.TopicSubject {
		k := ts.Field + "\x00" + ts.Subject
		if i, ok := index[k]; ok {
			return &out[i]
		}
		index[k] = len(out)
		out = append(out, ts)
		return &out[len(out)-1]
	}
	if s.subjects != nil {
		for _, subj := range s.subjects() {
			for _, field := range []string{"key", "value"} {
				if subj == topic+"-"+field {
					add(templates.TopicSubject{Subject: subj, Field: field, ByTopic: true})
				}
			}
		}
	}
	if s.dec != nil && s.rd != nil {
		res, err := s.rd.Read(ctx, kafkaview.Query{Topic: topic, Partition: -1, From: kafkaview.FromLatest, Limit: topicSchemaSample})
		if err == nil {
			seenIDs := map[[2]int]bool{}
			for _, r := range res.Records {
				for i, b := range [][]byte{r.Key, r.Value} {
					field := [...]string{"key", "value"}[i]
					id, _, err := serde.Header(b)
					if err != nil || seenIDs[[2]int{i, id}] {
						continue
					}
					seenIDs[[2]int{i, id}] = true
					d, err := s.dec.Decode(ctx, b)
					if err != nil {
						continue
					}
					ts := add(templates.TopicSubject{Subject: d.Subject, Field: field, ByTopic: d.Subject == topic+"-"+field})
					if !ts.Seen || d.Version > ts.Version {
						ts.Version, ts.ID, ts.Type = d.Version, d.ID, string(d.Type)
					}
					ts.Seen = true
				}
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Field != out[j].Field {
			return out[i].Field < out[j].Field
		}
		return strings.Compare(out[i].Subject, out[j].Subject) < 0
	})
	return out
}
