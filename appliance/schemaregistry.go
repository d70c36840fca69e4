package appliance

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/schemareg"
	"github.com/sluice-io/sluice/schemareg/serde"
	"github.com/sluice-io/sluice/zkcoord"
)

// The schema registry component (schema.registry.listen): Confluent's
// REST API over the _schemas topic of this cluster, read through the local
// broker like any Kafka client.
//
// Writes have one writer. On a single node it is this process. In a
// cluster it is the host whose ZooKeeper session holds the ephemeral
// /schema_registry_leader znode (under the chroot), holding that host's
// registry URL; the others answer reads from their own view of _schemas and
// forward writes to it. The registry has its own election rather than
// following the console leader because it runs on hosts without a console
// (console.listen empty) and its leader must be reachable over HTTP, which
// the node's data says how. A new leader writes a NOOP record and reads
// _schemas up to it before its first write, so ids continue from the
// largest id any leader wrote.

// SchemaRegistryLeaderPath is the registry's election znode.
const SchemaRegistryLeaderPath = "/schema_registry_leader"

type schemaRegistryComponent struct {
	a   *App
	log *schemareg.KafkaLog
	reg *schemareg.Registry
	ld  *zkcoord.Leadership
	srv *http.Server
	db  *consoledb.DB
	url string

	serveDone chan struct{}
}

// SchemaRegistry returns the running registry of a (nil when it has none),
// for the console and the comparisons of the same process.
func SchemaRegistry(a *App) *schemareg.Registry {
	a.schemaRegMu.Lock()
	defer a.schemaRegMu.Unlock()
	return a.schemaReg
}

// SchemaSource is a serde.Source reading a's registry when a call is made
// (the console starts before the registry does).
func SchemaSource(a *App) serde.Source { return lazySource{a} }

type lazySource struct{ a *App }

var errNoRegistry = errors.New("this host runs no schema registry (schema.registry.listen is empty)")

func (l lazySource) SchemaByID(ctx context.Context, id int) (*serde.Registered, error) {
	if r := SchemaRegistry(l.a); r != nil {
		return r.SchemaByID(ctx, id)
	}
	return nil, errNoRegistry
}

func (l lazySource) SchemaBySubject(ctx context.Context, subject string, v int) (*serde.Registered, error) {
	if r := SchemaRegistry(l.a); r != nil {
		return r.SchemaBySubject(ctx, subject, v)
	}
	return nil, errNoRegistry
}

// newSchemaRegistry returns the component, or nil when
// schema.registry.listen is empty.
func newSchemaRegistry(a *App) *schemaRegistryComponent {
	if a.Config().SchemaRegistryListen == "" {
		return nil
	}
	return &schemaRegistryComponent{a: a}
}

type leaderNode struct {
	Version   int    `json:"version"`
	BrokerID  int32  `json:"brokerid"`
	Host      string `json:"host"`
	URL       string `json:"url"`
	Timestamp string `json:"timestamp"`
}

type zkLeader struct{ l *zkcoord.Leadership }

func (z zkLeader) IsLeader() bool { return z.l.IsLeader() }

func (z zkLeader) LeaderURL() string {
	var n leaderNode
	if json.Unmarshal([]byte(z.l.Holder()), &n) != nil {
		return ""
	}
	return n.URL
}

func (c *schemaRegistryComponent) Start(ctx context.Context) (err error) {
	cfg := c.a.Config()
	logger := c.a.Logger().With("component", "schema-registry")
	ln, err := net.Listen("tcp", cfg.SchemaRegistryListen)
	if err != nil {
		if _, given := cfg.Given["schema.registry.listen"]; !given && errors.Is(err, syscall.EADDRINUSE) {
			logger.Warn("schema registry not started: its default address is in use (set schema.registry.listen to another address, or empty to disable it)",
				"listen", cfg.SchemaRegistryListen)
			return nil
		}
		return fmt.Errorf("schema.registry.listen %q: %w", cfg.SchemaRegistryListen, err)
	}
	defer func() {
		if err != nil {
			ln.Close()
			c.Close()
		}
	}()
	scheme := "http"
	forward := &http.Client{Timeout: 30 * time.Second}
	if cfg.SchemaRegistryTLSCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.SchemaRegistryTLSCert, cfg.SchemaRegistryTLSKey)
		if err != nil {
			return fmt.Errorf("schema.registry.tls.cert/key: %w", err)
		}
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
		scheme = "https"
		// Forwarded writes trust the system roots and this host's own
		// certificate (hosts of a cluster commonly share one).
		pool, perr := x509.SystemCertPool()
		if perr != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if pem, err := os.ReadFile(cfg.SchemaRegistryTLSCert); err == nil {
			pool.AppendCertsFromPEM(pem)
		}
		forward.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	}
	c.url = cfg.SchemaRegistryAdvertisedURL
	if c.url == "" {
		c.url = c.advertisedURL(scheme, ln.Addr().(*net.TCPAddr).Port)
	}

	var leader schemareg.Leader
	var peerKey []byte
	if zc, ok := c.a.Coordinator().(*zkcoord.Coordinator); ok {
		kctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		peerKey, err = zc.SharedSecret(kctx, zkcoord.SchemaRegistryKeyPath, 32)
		cancel()
		if err != nil {
			return fmt.Errorf("schema registry key: %w", err)
		}
		host, _ := os.Hostname()
		data, _ := json.Marshal(leaderNode{Version: 1, BrokerID: c.a.BrokerID(), Host: host, URL: c.url,
			Timestamp: strconv.FormatInt(time.Now().UnixMilli(), 10)})
		c.ld, err = zc.Lead(SchemaRegistryLeaderPath, data)
		if err != nil {
			return fmt.Errorf("schema registry leadership: %w", err)
		}
		select {
		case <-c.ld.Decided():
		case <-time.After(5 * time.Second):
		}
		leader = zkLeader{c.ld}
	}

	var auth schemareg.Authenticator
	if cfg.SchemaRegistryAuth == "basic" {
		if err := os.MkdirAll(cfg.ConsoleDataDir, 0o750); err != nil {
			return fmt.Errorf("console.data.dir: %w", err)
		}
		db, users, err := consoledb.OpenConsole(ctx, cfg.ConsoleDataDir)
		if err != nil {
			return fmt.Errorf("schema.registry.auth=basic: the console's users: %w", err)
		}
		c.db = db
		auth = consoleAuth(users)
	}

	brk := c.a.Broker()
	c.log = &schemareg.KafkaLog{Brokers: c.a.BootstrapAddrs(), ClientOpts: c.a.ClientOpts(), TopicExists: func() bool {
		img := brk.Image()
		return img != nil && img.Topics[schemareg.Topic] != nil
	}}
	c.reg = schemareg.New(schemareg.Config{
		Log:     c.log,
		Leader:  leader,
		Logger:  logger,
		Metrics: c.a.Metrics().SchemaRegistry(),
		Auth:    auth,
		Forward: forward,
		PeerKey: peerKey,
	})
	c.reg.Start(context.Background())
	c.srv = &http.Server{Handler: c.reg.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelDebug)} // TLS handshake noise
	c.serveDone = make(chan struct{})
	go func() {
		defer close(c.serveDone)
		if err := c.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("schema registry stopped serving", "err", err)
		}
	}()
	c.a.schemaRegMu.Lock()
	c.a.schemaReg = c.reg
	c.a.schemaRegMu.Unlock()
	logger.Info("schema registry listening", "url", c.url, "listen", ln.Addr().String(), "auth", cfg.SchemaRegistryAuth)
	return nil
}

// consoleAuth checks credentials against the console's users: viewers
// read, operators and admins also write.
func consoleAuth(users *consoledb.Console) schemareg.Authenticator {
	return func(ctx context.Context, user, pw string) (schemareg.Role, error) {
		u, err := users.Authenticate(ctx, user, pw)
		if errors.Is(err, consoledb.ErrBadCredentials) {
			return schemareg.RoleNone, nil
		}
		if err != nil {
			return schemareg.RoleNone, err
		}
		if u.Role.Allows(consoledb.RoleOperator) {
			return schemareg.RoleWrite, nil
		}
		if u.Role.Allows(consoledb.RoleViewer) {
			return schemareg.RoleRead, nil
		}
		return schemareg.RoleNone, nil
	}
}

// advertisedURL is the URL other hosts reach this registry at: the
// listener's host, or for a wildcard listener the host of the broker's
// first advertised listener.
func (c *schemaRegistryComponent) advertisedURL(scheme string, port int) string {
	return scheme + "://" + net.JoinHostPort(reachableHost(c.a, c.a.Config().SchemaRegistryListen), strconv.Itoa(port))
}

// Close stops serving (in-flight requests finish, up to 10s), then the
// registry's reader, the leadership and the database.
func (c *schemaRegistryComponent) Close() error {
	c.a.schemaRegMu.Lock()
	c.a.schemaReg = nil
	c.a.schemaRegMu.Unlock()
	var errs []error
	if c.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := c.srv.Shutdown(ctx); err != nil {
			errs = append(errs, err)
		}
		cancel()
		<-c.serveDone
	}
	if c.reg != nil {
		errs = append(errs, c.reg.Close())
	}
	if c.log != nil {
		c.log.Close()
	}
	if c.ld != nil {
		errs = append(errs, c.ld.Close())
	}
	if c.db != nil {
		errs = append(errs, c.db.Close())
	}
	return errors.Join(errs...)
}
