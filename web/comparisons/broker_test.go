package comparisons_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/appliance"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/web/webtest"
)

// realBrokers returns the bootstrap address of a real Sluice broker for
// the browser test and the prefix its topic names must carry: the cluster
// in SLUICE_TEST_BROKERS when set (a unique prefix, as the cluster is
// shared), else an in-process broker (package appliance) on a free loopback
// port with its data in a temporary directory, stopped with the test (no
// prefix: the topics are ORDER and ORDERNEW).
func realBrokers(t *testing.T) ([]string, string) {
	t.Helper()
	if env := os.Getenv("SLUICE_TEST_BROKERS"); env != "" {
		return strings.Split(env, ","), fmt.Sprintf("e2e-%d-", time.Now().UnixNano()%1e9)
	}
	addr := testutil.FreeAddr(t)
	dir := t.TempDir()
	cfg, err := appliance.Load("", []string{
		"listeners=PLAINTEXT://" + addr,
		"log.dirs=" + filepath.Join(dir, "kafka"),
		"console.listen=",
	})
	if err != nil {
		t.Fatal(err)
	}
	app, err := appliance.New(cfg, webtest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := app.Start(ctx); err != nil {
		t.Fatalf("start broker: %v", err)
	}
	t.Cleanup(func() {
		if err := app.Close(); err != nil {
			t.Errorf("close broker: %v", err)
		}
	})
	return []string{addr}, ""
}
