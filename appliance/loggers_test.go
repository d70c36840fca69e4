package appliance

import (
	"context"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/loglevels"
	"github.com/sluice-io/sluice/internal/testutil"
)

// TestBrokerLoggers: the log level of the broker and of each component
// changes at run time through Kafka's BROKER_LOGGER configs
// (kafka-configs.sh --entity-type broker-loggers), and the log shows it.
func TestBrokerLoggers(t *testing.T) {
	dir := t.TempDir()
	cfg, err := Load("", []string{
		"listeners=PLAINTEXT://" + testutil.FreeAddr(t),
		"log.dirs=" + filepath.Join(dir, "kafka"),
		"console.data.dir=" + filepath.Join(dir, "console"),
		"console.listen=", "schema.registry.listen=",
	})
	if err != nil {
		t.Fatal(err)
	}
	var out testutil.LockedBuffer
	levels := loglevels.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}), slog.LevelInfo)
	app, err := New(cfg, slog.New(levels.Handler()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := app.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close() })
	cl, err := kgo.NewClient(kgo.SeedBrokers(app.BootstrapAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	id := strconv.Itoa(int(app.BrokerID()))

	describe := func() map[string]string {
		t.Helper()
		req := kmsg.NewPtrDescribeConfigsRequest()
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeBrokerLogger, id
		req.Resources = append(req.Resources, r)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || resp.Resources[0].ErrorCode != 0 {
			t.Fatalf("describe loggers: %v %+v", err, resp)
		}
		got := map[string]string{}
		for _, c := range resp.Resources[0].Configs {
			if c.Source != kmsg.ConfigSourceDynamicBrokerLoggerConfig {
				t.Errorf("%s: source %v", c.Name, c.Source)
			}
			got[c.Name] = *c.Value
		}
		return got
	}
	alter := func(name string, op kmsg.IncrementalAlterConfigOp, value string) error {
		t.Helper()
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		r := kmsg.NewIncrementalAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeBrokerLogger, id
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = name, op, &value
		r.Configs = append(r.Configs, c)
		req.Resources = append(req.Resources, r)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return kerr.ErrorForCode(resp.Resources[0].ErrorCode)
	}

	got := describe()
	if got["root"] != "INFO" || got["broker"] != "INFO" || got["storage"] != "INFO" {
		t.Fatalf("loggers %v", got)
	}
	if err := alter("broker", kmsg.IncrementalAlterConfigOpSet, "DEBUG"); err != nil {
		t.Fatal(err)
	}
	if got := describe(); got["broker"] != "DEBUG" || got["storage"] != "INFO" {
		t.Fatalf("after SET broker=DEBUG: %v", got)
	}
	// A component's own level wins over the root's, both ways.
	before := out.Len()
	if err := alter("root", kmsg.IncrementalAlterConfigOpSet, "WARN"); err != nil {
		t.Fatal(err)
	}
	app.logger.With("component", "broker").Debug("probe-debug-line")
	app.logger.With("component", "storage").Info("probe-info-line")
	if s := out.String()[before:]; !strings.Contains(s, "probe-debug-line") || strings.Contains(s, "probe-info-line") {
		t.Fatalf("levels not in force:\n%s", s)
	}
	if err := alter("broker", kmsg.IncrementalAlterConfigOpDelete, ""); err != nil {
		t.Fatal(err)
	}
	if got := describe(); got["broker"] != "WARN" || got["root"] != "WARN" {
		t.Fatalf("after DELETE broker: %v", got)
	}
	for _, bad := range []struct {
		name, level string
		want        error
	}{{"nosuch", "INFO", kerr.InvalidConfig}, {"broker", "LOUD", kerr.InvalidConfig}} {
		if err := alter(bad.name, kmsg.IncrementalAlterConfigOpSet, bad.level); err != bad.want {
			t.Errorf("%s=%s: %v, want %v", bad.name, bad.level, err, bad.want)
		}
	}
	if err := alter("root", kmsg.IncrementalAlterConfigOpDelete, ""); err != kerr.InvalidRequest {
		t.Errorf("DELETE root: %v", err)
	}
}
