package appliance

import (
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/sdnotify"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/storage"
)

// TestLoadProgressToSystemd: while the broker loads its logs at start,
// systemd's status line (sd_notify STATUS=) says how far it is, the same
// line the log gets.
func TestLoadProgressToSystemd(t *testing.T) {
	base := t.TempDir()
	logDir := filepath.Join(base, "kafka")
	m, err := storage.OpenManager(storage.ManagerConfig{Dirs: []string{logDir}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.GetOrCreateLog(storage.TopicPartition{Topic: "loaded", Partition: 0}, storage.DefaultLogConfig()); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	socket := filepath.Join(base, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: socket, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv(sdnotify.SocketEnv, socket)

	logged, err := startStop(t, "", "listeners=PLAINTEXT://"+testutil.FreeAddr(t), "console.listen="+testutil.FreeAddr(t),
		"offsets.topic.num.partitions=1", "log.dirs="+logDir, "console.data.dir="+filepath.Join(base, "console"))
	if err != nil {
		t.Fatal(err)
	}
	const want = "loaded 1/1 logs, 0.0 MB recovered"
	if !strings.Contains(logged, want) {
		t.Errorf("no progress line %q in the log:\n%s", want, logged)
	}
	buf := make([]byte, 4096)
	var got []string
	for {
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("no STATUS=%s among the notifications %q: %v", want, got, err)
		}
		got = append(got, string(buf[:n]))
		if string(buf[:n]) == "STATUS="+want {
			return
		}
	}
}

// TestRecoveryThreadsFromConfig: num.recovery.threads.per.data.dir reaches
// the start's log loading (the storage tests check that the loads keep to
// it); the default is 8.
func TestRecoveryThreadsFromConfig(t *testing.T) {
	base := t.TempDir()
	logDir := filepath.Join(base, "kafka")
	m, err := storage.OpenManager(storage.ManagerConfig{Dirs: []string{logDir}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.GetOrCreateLog(storage.TopicPartition{Topic: "loaded", Partition: 0}, storage.DefaultLogConfig()); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ set, want string }{{"3", "threads_per_dir=3"}, {"", "threads_per_dir=8"}} {
		over := []string{"listeners=PLAINTEXT://" + testutil.FreeAddr(t), "console.listen=" + testutil.FreeAddr(t),
			"offsets.topic.num.partitions=1", "log.dirs=" + logDir, "console.data.dir=" + filepath.Join(base, "console")}
		if tc.set != "" {
			over = append(over, "num.recovery.threads.per.data.dir="+tc.set)
		}
		logged, err := startStop(t, "", over...)
		if err != nil {
			t.Fatal(err)
		}
		var line string
		for l := range strings.Lines(logged) {
			if strings.Contains(l, `msg="loading logs"`) {
				line = l
				break
			}
		}
		if !strings.Contains(line, tc.want) {
			t.Errorf("num.recovery.threads.per.data.dir=%q: want %s in the log's loading line, got %q", tc.set, tc.want, line)
		}
	}
	if _, err := startStop(t, "", "num.recovery.threads.per.data.dir=0", "log.dirs="+logDir); err == nil ||
		!strings.Contains(err.Error(), "num.recovery.threads.per.data.dir") {
		t.Errorf("num.recovery.threads.per.data.dir=0: %v, want an error naming the key", err)
	}
}
