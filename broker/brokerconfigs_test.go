package broker

import (
	"testing"

	"github.com/sluice-io/sluice/config"
)

// DescribeConfigs(BROKER): every key of the table is listed, in its order;
// a given key shows its value as STATIC_BROKER_CONFIG with the default as
// its second synonym, a key left alone shows the default, broker.id shows
// the id in use, and every entry is read-only with the key's type and doc.
func TestBrokerConfigEntries(t *testing.T) {
	c, err := config.Parse(map[string]string{"log.retention.hours": "2", "sasl.jaas.config": "secret"})
	if err != nil {
		t.Fatal(err)
	}
	got := BrokerConfigEntries(c, 7)
	var keys []config.Key // the keys, without the entries documenting a prefix
	for _, k := range config.Keys() {
		if !k.IsPrefix() {
			keys = append(keys, k)
		}
	}
	if len(got) != len(keys) {
		t.Fatalf("%d entries, want %d", len(got), len(keys))
	}
	byName := map[string]ConfigEntry{}
	for i, e := range got {
		if e.Name != keys[i].Name || !e.ReadOnly || e.Doc != keys[i].Documentation() || e.Type != keys[i].Type {
			t.Errorf("entry %d = %+v, want %s, read-only, with its type and doc", i, e, keys[i].Name)
		}
		byName[e.Name] = e
	}
	if e := byName["broker.id"]; *e.Value != "7" || e.Source != SourceDefault {
		t.Errorf("broker.id = %s (source %v), want 7 from the default", *e.Value, e.Source)
	}
	e := byName["log.retention.hours"]
	if *e.Value != "2" || e.Source != SourceStaticBroker || len(e.Synonyms) != 2 || e.Type != TypeInt ||
		e.Synonyms[0] != (ConfigSynonym{Name: "log.retention.hours", Value: "2", Source: SourceStaticBroker}) ||
		e.Synonyms[1] != (ConfigSynonym{Name: "log.retention.hours", Value: "168", Source: SourceDefault}) {
		t.Errorf("given key = %s %v %+v, want 2 STATIC_BROKER_CONFIG with the default as synonym", *e.Value, e.Source, e.Synonyms)
	}
	// A PASSWORD key is never shown.
	if e := byName["sasl.jaas.config"]; e.Value != nil || !e.Sensitive || e.Synonyms[0].Value != "" {
		t.Errorf("sasl.jaas.config = %+v, want a sensitive entry without its value", e)
	}
	if e := byName["num.partitions"]; *e.Value != "1" || e.Source != SourceDefault || len(e.Synonyms) != 1 {
		t.Errorf("default key = %s %v %+v, want 1 DEFAULT_CONFIG", *e.Value, e.Source, e.Synonyms)
	}
}
