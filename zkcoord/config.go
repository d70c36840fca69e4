package zkcoord

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"
)

// Kafka's defaults for the ZooKeeper client settings.
const (
	DefaultSessionTimeout = 18 * time.Second // zookeeper.session.timeout.ms
)

// Config configures a Coordinator.
type Config struct {
	// Connect is zookeeper.connect: "host:port[,host:port...][/chroot]". The
	// chroot (created when missing) holds every znode, so several clusters
	// can share one ensemble.
	Connect string
	// SessionTimeout is zookeeper.session.timeout.ms (default 18s): how long
	// ZooKeeper keeps a silent client's session, and so how long a broker
	// killed with kill -9 stays registered.
	SessionTimeout time.Duration
	// ConnectionTimeout is zookeeper.connection.timeout.ms (default: the
	// session timeout): how long Open waits for the first session.
	ConnectionTimeout time.Duration
	// ChangeRetention is how long change notifications
	// (/state_change_notification, /config/changes) are kept before the
	// controller purges them (default: 15 minutes, as Kafka keeps
	// /config/changes). A broker whose session lives processes them within
	// milliseconds; one whose session expired reloads everything.
	ChangeRetention time.Duration
	// Logger receives the coordinator's and the ZooKeeper client's logs.
	Logger *slog.Logger

	// SetACL is zookeeper.set.acl: the znodes this broker creates can be
	// changed only by the identity it authenticated as (Digest, or the
	// client certificate of TLS), and read by everyone but under the
	// sensitive paths (zkacl.go). Open refuses it without an identity.
	SetACL bool
	// Digest is the user:password the client authenticates with
	// (ZooKeeper's digest scheme, zkCli's addauth digest); empty for none.
	Digest string
	// TLS, when set, is how the client connects: zookeeper.ssl.* (tls.go).
	TLS *tls.Config
}

// ConnectString is a parsed zookeeper.connect value.
type ConnectString struct {
	Servers []string // host:port
	Chroot  string   // "" or "/a/b" (no trailing slash)
}

// ParseConnect parses zookeeper.connect: comma-separated host:port pairs
// (the port defaults to 2181, as in ZooKeeper's own client), optionally
// followed by a chroot path that starts with '/' and applies to all hosts:
// "zk1:2181,zk2:2181/sluice".
func ParseConnect(s string) (ConnectString, error) {
	var cs ConnectString
	s = strings.TrimSpace(s)
	if s == "" {
		return cs, errors.New("zookeeper.connect is empty")
	}
	hosts := s
	if i := strings.IndexByte(s, '/'); i >= 0 {
		hosts, cs.Chroot = s[:i], s[i:]
		if err := validateChroot(cs.Chroot); err != nil {
			return cs, fmt.Errorf("zookeeper.connect %q: %w", s, err)
		}
		cs.Chroot = strings.TrimSuffix(cs.Chroot, "/")
	}
	for _, h := range strings.Split(hosts, ",") {
		h = strings.TrimSpace(h)
		if h == "" {
			return cs, fmt.Errorf("zookeeper.connect %q: empty host in the server list", s)
		}
		host, port, err := net.SplitHostPort(h)
		if err != nil {
			// No port: ZooKeeper's default client port.
			if strings.Contains(h, ":") && !strings.HasPrefix(h, "[") {
				return cs, fmt.Errorf("zookeeper.connect %q: bad server %q: %w", s, h, err)
			}
			host, port = strings.Trim(h, "[]"), "2181"
		}
		if host == "" {
			return cs, fmt.Errorf("zookeeper.connect %q: server %q has no host", s, h)
		}
		p, err := strconv.Atoi(port)
		if err != nil || p < 1 || p > 65535 {
			return cs, fmt.Errorf("zookeeper.connect %q: server %q has a bad port", s, h)
		}
		cs.Servers = append(cs.Servers, net.JoinHostPort(host, port))
	}
	return cs, nil
}

// validateChroot applies ZooKeeper's path rules to a chroot.
func validateChroot(p string) error {
	if p == "/" {
		return nil
	}
	if !strings.HasPrefix(p, "/") {
		return fmt.Errorf("chroot %q must start with /", p)
	}
	for _, part := range strings.Split(strings.TrimSuffix(p[1:], "/"), "/") {
		switch part {
		case "":
			return fmt.Errorf("chroot %q has an empty path element", p)
		case ".", "..":
			return fmt.Errorf("chroot %q has a relative path element", p)
		}
		for _, r := range part {
			if r == 0 || r < 0x20 || r == 0x7f {
				return fmt.Errorf("chroot %q has a control character", p)
			}
		}
	}
	return nil
}

func (c *Config) setDefaults() {
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = DefaultSessionTimeout
	}
	if c.ConnectionTimeout <= 0 {
		c.ConnectionTimeout = c.SessionTimeout
	}
	if c.ChangeRetention <= 0 {
		c.ChangeRetention = 15 * time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}
