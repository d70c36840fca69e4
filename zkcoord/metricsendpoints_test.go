package zkcoord

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/testutil"
)

// Each host advertises its metrics URL in its own ephemeral node; every
// host reads all of them; a node goes when its host gives it up or its
// session ends, and an operator's delete is undone by its holder.
func TestMetricsEndpoints(t *testing.T) {
	testutil.Heavy(t, "ZooKeeper")
	chroot := newChroot()
	a := open(t, zkServer.Addr(), chroot)
	b := open(t, zkServer.Addr(), chroot)
	raw := rawConn(t, zkServer.Addr())
	ctx := context.Background()

	if eps, err := a.MetricsEndpoints(ctx); err != nil || len(eps) != 0 {
		t.Fatalf("before any advertisement: %v %v", eps, err)
	}
	la, err := a.AdvertiseMetrics(1, []byte(`{"metrics_url":"http://a:9308/metrics"}`))
	mustOK(t, err)
	lb, err := b.AdvertiseMetrics(2, []byte(`{"metrics_url":"http://b:9308/metrics"}`))
	mustOK(t, err)
	defer lb.Close()
	want := func(w string) {
		t.Helper()
		testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
			eps, err := b.MetricsEndpoints(ctx)
			if err != nil {
				return err
			}
			got := ""
			for _, e := range eps {
				got += fmt.Sprintf("%d=%s ", e.BrokerID, e.Data)
			}
			if got != w {
				return fmt.Errorf("endpoints %q, want %q", got, w)
			}
			return nil
		})
	}
	want(`1={"metrics_url":"http://a:9308/metrics"} 2={"metrics_url":"http://b:9308/metrics"} `)

	// An operator deletes a's node: a makes it again.
	mustOK(t, raw.Delete(chroot+MetricsEndpointsPath+"/1", -1))
	want(`1={"metrics_url":"http://a:9308/metrics"} 2={"metrics_url":"http://b:9308/metrics"} `)

	// a stops advertising: its node goes at once.
	mustOK(t, la.Close())
	want(`2={"metrics_url":"http://b:9308/metrics"} `)
}
