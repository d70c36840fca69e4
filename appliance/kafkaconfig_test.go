package appliance

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/testutil"
)

// TestStartWithKafkaServerProperties: a broker started from Apache Kafka
// 3.9's stock server.properties (a single node: the operator points
// zookeeper.connect and log.dirs elsewhere with --override) starts and logs
// exactly one warning, naming Kafka's keys that Sluice ignores.
func TestStartWithKafkaServerProperties(t *testing.T) {
	dir := t.TempDir()
	cfg, err := Load("../config/testdata/kafka-3.9-server.properties", []string{
		"zookeeper.connect=",
		"listeners=PLAINTEXT://" + testutil.FreeAddr(t),
		"log.dirs=" + filepath.Join(dir, "kafka"),
		"console.data.dir=" + filepath.Join(dir, "console"),
		"console.listen=",
		"schema.registry.listen=",
	})
	if err != nil {
		t.Fatal(err)
	}
	var log testutil.LockedBuffer
	app, err := New(cfg, slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := app.Start(ctx); err != nil {
		t.Fatalf("start: %v\n%s", err, log.String())
	}
	if err := app.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	var warns []string
	for _, l := range strings.Split(log.String(), "\n") {
		if strings.Contains(l, "level=WARN") {
			warns = append(warns, l)
		}
	}
	if len(warns) != 1 || !strings.Contains(warns[0], "num.network.threads") || !strings.Contains(warns[0], "socket.send.buffer.bytes") {
		t.Fatalf("want one warning naming the ignored keys, got:\n%s", log.String())
	}
}
