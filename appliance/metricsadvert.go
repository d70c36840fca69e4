package appliance

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/sluice-io/sluice/alerting"
	"github.com/sluice-io/sluice/zkcoord"
)

// Broker metrics for the alert rules: each host serves its Prometheus
// metrics (metrics.listen, or the console listener at metrics.path, read
// without signing in). In a cluster each host advertises where, in the
// ephemeral znode /metrics_endpoints/<broker id> under the chroot, and the
// console that evaluates the rules scrapes every advertised host; on a
// single node it gathers its own registry in process.

// metricsEndpointNode is the data of /metrics_endpoints/<id>.
type metricsEndpointNode struct {
	Version   int    `json:"version"`
	BrokerID  int32  `json:"broker_id"`
	URL       string `json:"metrics_url"`
	Host      string `json:"host"`
	Timestamp string `json:"timestamp"`
}

// advertiseMetrics publishes where this host serves its metrics, in a
// cluster (nothing on a single node). Called once the metrics endpoint
// serves.
func (c *consoleComponent) advertiseMetrics() error {
	zc, ok := c.a.Coordinator().(*zkcoord.Coordinator)
	if !ok {
		return nil
	}
	u := c.metricsURL()
	if u == "" {
		return nil
	}
	host, _ := os.Hostname()
	data, err := json.Marshal(metricsEndpointNode{Version: 1, BrokerID: c.a.BrokerID(), URL: u, Host: host,
		Timestamp: strconv.FormatInt(time.Now().UnixMilli(), 10)})
	if err != nil {
		return err
	}
	if c.metricsAd, err = zc.AdvertiseMetrics(c.a.BrokerID(), data); err != nil {
		return fmt.Errorf("advertise the metrics endpoint: %w", err)
	}
	c.log.Info("metrics endpoint advertised", "url", u, "znode", zkcoord.MetricsEndpointsPath+"/"+strconv.Itoa(int(c.a.BrokerID())))
	return nil
}

// metricsURL is where other hosts reach this host's metrics: the
// standalone listener, else the console's.
func (c *consoleComponent) metricsURL() string {
	cfg := c.a.Config()
	switch {
	case c.msrv != nil:
		return "http://" + net.JoinHostPort(reachableHost(c.a, cfg.MetricsListen), strconv.Itoa(c.msrv.Addr().(*net.TCPAddr).Port)) + cfg.MetricsPath
	case c.srv != nil && c.srv.Addr() != nil:
		scheme := "http"
		if cfg.ConsoleTLSCert != "" {
			scheme = "https"
		}
		return scheme + "://" + net.JoinHostPort(reachableHost(c.a, cfg.ConsoleListen), strconv.Itoa(c.srv.Addr().(*net.TCPAddr).Port)) + cfg.MetricsPath
	}
	return ""
}

// reachableHost is the host other hosts reach a listener at: the listen
// address's host, or for a wildcard the host of the broker's first
// advertised listener (the host name when there is none).
func reachableHost(a *App, listen string) string {
	host, _, _ := net.SplitHostPort(listen)
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		return host
	}
	for _, l := range a.Config().AdvertisedEndpoints(map[string]int{}) {
		if l.Host != "" {
			return l.Host
		}
	}
	h, _ := os.Hostname()
	return h
}

// brokerMetricsSource is the alert rules' broker metrics: every advertised
// host scraped in a cluster, the own registry on a single node.
func (c *consoleComponent) brokerMetricsSource() alerting.MetricsSource {
	zc, ok := c.a.Coordinator().(*zkcoord.Coordinator)
	if !ok {
		return alerting.GatherMetrics(c.a.BrokerID(), c.reg.Gatherer())
	}
	cfg := c.a.Config()
	tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 1, IdleConnTimeout: time.Minute}
	if cfg.ConsoleTLSCert != "" {
		// Consoles on TLS: trust the system roots and this host's own
		// certificate (hosts of a cluster commonly share one), as the
		// schema registry's forwarded writes do.
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if pem, err := os.ReadFile(cfg.ConsoleTLSCert); err == nil {
			pool.AppendCertsFromPEM(pem)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return alerting.ScrapeMetrics(alerting.ScrapeConfig{
		Client: &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		Endpoints: func(ctx context.Context) ([]alerting.Endpoint, error) {
			nodes, err := zc.MetricsEndpoints(ctx)
			if err != nil {
				return nil, err
			}
			out := make([]alerting.Endpoint, 0, len(nodes))
			for _, n := range nodes {
				var d metricsEndpointNode
				if json.Unmarshal(n.Data, &d) != nil || d.URL == "" {
					c.log.Warn("unreadable metrics endpoint znode", "broker", n.BrokerID)
					continue
				}
				out = append(out, alerting.Endpoint{Broker: n.BrokerID, URL: d.URL})
			}
			return out, nil
		},
	})
}
