package broker

import "testing"

// DescribeConfigs(BROKER): a given key shows its value as
// STATIC_BROKER_CONFIG with the default as its second synonym, a key left
// alone shows the default, broker.id shows the id in use, and every entry
// is read-only.
func TestBrokerConfigEntries(t *testing.T) {
	keys := []BrokerKey{
		{Name: "broker.id", Default: "-1", Doc: "the broker id"},
		{Name: "log.retention.hours", Default: "168", Doc: "retention"},
		{Name: "num.partitions", Default: "1", Doc: "partitions"},
	}
	given := map[string]string{"log.retention.hours": "2"}
	got := BrokerConfigEntries(keys, given, 7)
	if len(got) != len(keys) {
		t.Fatalf("%d entries, want %d", len(got), len(keys))
	}
	for i, e := range got {
		if e.Name != keys[i].Name || !e.ReadOnly || e.Doc != keys[i].Doc {
			t.Errorf("entry %d = %+v, want %s, read-only, with its doc", i, e, keys[i].Name)
		}
	}
	if e := got[0]; *e.Value != "7" || e.Source != SourceDefault {
		t.Errorf("broker.id = %s (source %v), want 7 from the default", *e.Value, e.Source)
	}
	e := got[1]
	if *e.Value != "2" || e.Source != SourceStaticBroker || len(e.Synonyms) != 2 ||
		e.Synonyms[0] != (ConfigSynonym{Name: "log.retention.hours", Value: "2", Source: SourceStaticBroker}) ||
		e.Synonyms[1] != (ConfigSynonym{Name: "log.retention.hours", Value: "168", Source: SourceDefault}) {
		t.Errorf("given key = %s %v %+v, want 2 STATIC_BROKER_CONFIG with the default as synonym", *e.Value, e.Source, e.Synonyms)
	}
	if e := got[2]; *e.Value != "1" || e.Source != SourceDefault || len(e.Synonyms) != 1 {
		t.Errorf("default key = %s %v %+v, want 1 DEFAULT_CONFIG", *e.Value, e.Source, e.Synonyms)
	}
}
