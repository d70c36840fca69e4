package comparisons_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/testcluster"
)

// realBrokers returns the bootstrap address of a real Sluice broker for
// the browser test and the prefix its topic names must carry: the cluster
// in SLUICE_TEST_BROKERS when set (a unique prefix, as the cluster is
// shared), else an in-process broker (testcluster) on a free loopback port
// with its data in a temporary directory, stopped with the test (no prefix:
// the topics are ORDER and ORDERNEW).
func realBrokers(t *testing.T) ([]string, string) {
	t.Helper()
	if env := os.Getenv("SLUICE_TEST_BROKERS"); env != "" {
		return strings.Split(env, ","), fmt.Sprintf("e2e-%d-", time.Now().UnixNano()%1e9)
	}
	return testcluster.New(t).Addrs(), ""
}
