package broker

import "strconv"

// BrokerKey is one broker config key as DescribeConfigs(BROKER) lists it:
// its name, Kafka's default as text ("" when unset) and its documentation.
type BrokerKey struct {
	Name    string
	Default string
	Doc     string
}

// BrokerConfigEntries lists every key for DescribeConfigs(BROKER), in the
// order of keys: the value given in the config file or an override
// (STATIC_BROKER_CONFIG, given holds those), else the default
// (DEFAULT_CONFIG). broker.id shows brokerID, the id in use (it may come
// from meta.properties). All are read-only: they change by editing the file
// and restarting. The result is Config.BrokerConfigs.
func BrokerConfigEntries(keys []BrokerKey, given map[string]string, brokerID int32) []ConfigEntry {
	var out []ConfigEntry
	for _, k := range keys {
		e := ConfigEntry{Name: k.Name, ReadOnly: true, Type: TypeString, Doc: k.Doc, Source: SourceDefault}
		v := k.Default
		if g, ok := given[k.Name]; ok {
			v, e.Source = g, SourceStaticBroker
			e.Synonyms = append(e.Synonyms, ConfigSynonym{Name: k.Name, Value: g, Source: SourceStaticBroker})
		}
		e.Synonyms = append(e.Synonyms, ConfigSynonym{Name: k.Name, Value: k.Default, Source: SourceDefault})
		if k.Name == "broker.id" {
			v = strconv.Itoa(int(brokerID))
		}
		vv := v
		e.Value = &vv
		out = append(out, e)
	}
	return out
}
