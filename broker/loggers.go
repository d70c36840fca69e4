package broker

import (
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/config"
	"github.com/sluice-io/sluice/internal/loglevels"
)

// BROKER_LOGGER configs (Kafka's KIP-412): the broker's log levels, the
// root's and each component's (internal/loglevels), listed by
// DescribeConfigs and set with IncrementalAlterConfigs while the broker
// runs. Like Kafka's, they are not kept across a restart: serve's
// --log-level gives the root's at start.

// SourceDynamicBrokerLogger is Kafka's DYNAMIC_BROKER_LOGGER_CONFIG.
const SourceDynamicBrokerLogger ConfigSource = 6

func (b *Broker) loggerResource(name string) error {
	if b.cfg.Loggers == nil {
		return errorf(kerr.InvalidRequest, "this broker's log levels cannot be changed at run time")
	}
	if name != strconv.Itoa(int(b.cfg.BrokerID)) {
		return errorf(kerr.InvalidRequest, "the loggers of broker %s are described and altered on that broker", name)
	}
	return nil
}

// DescribeLoggers lists the loggers of this broker (resource: its id) with
// their levels (only names, when non-empty).
func (b *Broker) DescribeLoggers(resource string, names []string) ([]ConfigEntry, error) {
	if err := b.loggerResource(resource); err != nil {
		return nil, err
	}
	var out []ConfigEntry
	for _, l := range b.cfg.Loggers.Loggers() {
		v := l.Level
		out = append(out, ConfigEntry{Name: l.Name, Value: &v, Source: SourceDynamicBrokerLogger, Type: config.String,
			Doc: "Log level of " + l.Name + ": TRACE, DEBUG, INFO, WARN, ERROR or FATAL (TRACE logs as DEBUG, FATAL as ERROR)."})
	}
	return filterEntries(out, names), nil
}

// AlterLoggers applies IncrementalAlterConfigs operations to this broker's
// loggers: SET a level, DELETE a component's own level (back to the
// root's). Every operation is checked before any applies.
func (b *Broker) AlterLoggers(resource string, ops []ConfigOp, validateOnly bool) error {
	if err := b.loggerResource(resource); err != nil {
		return err
	}
	lv := b.cfg.Loggers
	for _, op := range ops {
		if !lv.Known(op.Name) {
			return errorf(kerr.InvalidConfig, "unknown logger %s", op.Name)
		}
		switch op.Op {
		case 0:
			if _, err := loglevels.Parse(op.Value); err != nil {
				return errorf(kerr.InvalidConfig, "%v", err)
			}
		case 1:
			if op.Name == loglevels.Root {
				return errorf(kerr.InvalidRequest, "the root logger's level cannot be removed")
			}
		default:
			return errorf(kerr.InvalidRequest, "operation %d is not allowed on a logger: SET or DELETE", op.Op)
		}
	}
	if validateOnly {
		return nil
	}
	for _, op := range ops {
		var err error
		if op.Op == 0 {
			err = lv.Set(op.Name, op.Value)
		} else {
			err = lv.Reset(op.Name)
		}
		if err != nil {
			return errorf(kerr.InvalidConfig, "%v", err)
		}
		b.log.Info("log level changed", "logger", op.Name, "level", op.Value, "op", op.Op)
	}
	return nil
}
