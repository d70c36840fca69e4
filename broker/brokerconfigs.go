package broker

import (
	"strconv"

	"github.com/sluice-io/sluice/config"
)

// BrokerConfigEntries lists every broker key of the table (package config)
// for DescribeConfigs(BROKER), in the table's order, with its type and
// documentation: the value given in the config file or an override
// (STATIC_BROKER_CONFIG; c.Given holds those), else the default
// (DEFAULT_CONFIG). broker.id shows brokerID, the id in use (it may come
// from meta.properties). All are read-only: Sluice reads them at start, so
// they change by editing the file and restarting. The result is
// Config.BrokerConfigs.
func BrokerConfigEntries(c *config.Config, brokerID int32) []ConfigEntry {
	keys := config.Keys()
	out := make([]ConfigEntry, 0, len(keys))
	for _, k := range keys {
		if k.IsPrefix() {
			continue // a family of keys, documented, not a key
		}
		e := ConfigEntry{Name: k.Name, ReadOnly: true, Type: k.Type, Doc: k.Documentation(), Source: SourceDefault}
		v := k.Default
		if g, ok := c.Given[k.Name]; ok {
			v, e.Source = g, SourceStaticBroker
			e.Synonyms = append(e.Synonyms, ConfigSynonym{Name: k.Name, Value: g, Source: SourceStaticBroker})
		}
		e.Synonyms = append(e.Synonyms, ConfigSynonym{Name: k.Name, Value: k.Default, Source: SourceDefault})
		if k.Name == "broker.id" {
			v = strconv.Itoa(int(brokerID))
		}
		e.Value = &v
		if k.Type == config.Password {
			// Kafka's PASSWORD keys: never shown.
			e.Value, e.Sensitive = nil, true
			for i := range e.Synonyms {
				e.Synonyms[i].Value = ""
			}
		}
		out = append(out, e)
	}
	return out
}
