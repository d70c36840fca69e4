package appliance

import (
	"errors"
	"fmt"

	"github.com/sluice-io/sluice/alerting"
	"github.com/sluice-io/sluice/config"
	"github.com/sluice-io/sluice/web"
)

// Config is the appliance's configuration: config.Config, one typed field
// per key of the table in package config (where every key is defined, with
// its default, documentation and rules), and the checks that need the
// appliance's parts: the directories on disk, the console's trusted proxies,
// the alert targets. Build one with Load, FromMap or DefaultConfig.
type Config struct {
	config.Config
}

// DefaultConfig returns the configuration with every key at its default.
func DefaultConfig() *Config { return &Config{Config: *config.Default()} }

// Load reads the properties file at path (none when path is "") and then the
// overrides ("key=value", applied in order, later ones win), and returns the
// validated configuration. An unknown key or a bad value is an error naming
// the key.
func Load(path string, overrides []string) (*Config, error) {
	given, err := config.ReadGiven(path, overrides)
	if err != nil {
		return nil, err
	}
	return FromMap(given)
}

// FromMap builds a validated configuration from explicitly given keys.
func FromMap(given map[string]string) (*Config, error) {
	c, err := config.Parse(given)
	if err != nil {
		return nil, err
	}
	ac := &Config{Config: *c}
	if err := ac.Validate(); err != nil {
		return nil, err
	}
	return ac, nil
}

// Validate checks every key (config.Config.Validate) and what needs the
// appliance's parts; the error names the key.
func (c *Config) Validate() error {
	errs := []error{c.Config.Validate()}
	bad := func(key string, err error) { errs = append(errs, fmt.Errorf("config: %s: %v", key, err)) }
	if err := web.ValidateTrustedProxies(c.ConsoleTrustedProxies); err != nil {
		bad("console.trusted.proxies", err)
	}
	if _, err := alerting.ParseTargets(c.AlertingAllowedTargets); err != nil {
		bad("alerting.allowed.targets", errors.Unwrap(err)) // the error names the key already
	}
	if _, err := alerting.ParseProxy(c.AlertingProxy); err != nil {
		bad("alerting.proxy", errors.Unwrap(err))
	}
	errs = append(errs, c.checkDirs()...) // dirs.go
	return errors.Join(errs...)
}
