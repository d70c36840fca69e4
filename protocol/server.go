package protocol

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-io/sluice/broker"
	"github.com/sluice-io/sluice/cluster"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/quota"
	"github.com/sluice-io/sluice/security"
)

// Listener is one address the server accepts connections on, with its
// security protocol (see sasl.go).
type Listener struct {
	Name string // listener name (PLAINTEXT); Metadata answers with the endpoints of this name
	Addr string // host:port; port 0 picks a free one

	// SecurityProtocol is PLAINTEXT ("" too), SSL, SASL_PLAINTEXT or
	// SASL_SSL.
	SecurityProtocol string
	// TLS serves SSL and SASL_SSL listeners.
	TLS *security.ServerTLS
	// PrincipalMapper turns a client certificate into the principal of an
	// SSL connection (ssl.principal.mapping.rules); nil is DEFAULT.
	PrincipalMapper *security.PrincipalMapper
	// Mechanisms are the SASL mechanisms a SASL listener accepts
	// (sasl.enabled.mechanisms).
	Mechanisms []string
	// Reauth is connections.max.reauth.ms by mechanism: the lifetime of
	// a SASL session (KIP-368); 0 or absent, sessions do not expire.
	Reauth map[string]time.Duration
	// MaxReceiveSize is sasl.server.max.receive.size: the largest frame
	// before authentication (0: DefaultSaslMaxReceiveSize).
	MaxReceiveSize int32
}

// Config configures a Server.
type Config struct {
	Listeners []Listener
	Broker    *broker.Broker
	// Groups is the consumer-group coordinator the group handlers call; nil
	// until it is wired (see groups.go).
	Groups GroupCoordinator
	// Txn is the transaction coordinator (see txn.go); nil answers the
	// transaction APIs COORDINATOR_NOT_AVAILABLE.
	Txn TxnCoordinator
	// Controller is this broker's controller role, which the
	// controller-only APIs (ControlledShutdown, ElectLeaders,
	// AlterPartitionReassignments) call; nil answers them NOT_CONTROLLER.
	Controller Controller
	Logger     *slog.Logger
	// MaxRequestBytes is socket.request.max.bytes: a larger frame closes the
	// connection.
	MaxRequestBytes int32
	// LogDirs are the broker's log directories (DescribeLogDirs).
	LogDirs []string
	// MaxInFlight is how many requests one connection may have read but not
	// yet answered before the server stops reading from it (default 100).
	MaxInFlight int
	// ConnectionsMaxIdle is connections.max.idle.ms: a connection that read
	// and wrote nothing for this long is closed. 0 is
	// DefaultConnectionsMaxIdle; negative never closes idle connections.
	ConnectionsMaxIdle time.Duration
	// RequestReadTimeout is socket.request.read.timeout.ms: once the first
	// byte of a request frame has arrived the whole frame must arrive within
	// this long, or the connection is closed (a slow or stalled sender). 0
	// is DefaultRequestReadTimeout; negative waits forever.
	RequestReadTimeout time.Duration
	// MaxConnections is max.connections: a connection accepted while this
	// many are open is closed at once. 0 is DefaultMaxConnections.
	MaxConnections int
	// MaxConnectionsPerIP is max.connections.per.ip: a connection from an
	// address that has this many open is closed at once. 0 is
	// DefaultMaxConnectionsPerIP, unless overrides are set: then, as in
	// Kafka, only the addresses listed there may connect.
	MaxConnectionsPerIP int
	// MaxConnectionsPerIPOverrides is max.connections.per.ip.overrides:
	// the per-address limit of particular addresses (IP -> limit).
	MaxConnectionsPerIPOverrides map[string]int
	// QueuedMaxRequestBytes is queued.max.request.bytes: the request bytes
	// read and not yet handled, over every connection. A reader that would
	// exceed it waits before reading more. 0 is
	// DefaultQueuedMaxRequestBytes; negative is unbounded (Kafka's -1).
	QueuedMaxRequestBytes int64
	// Metrics is the registry the request and connection metrics go to
	// (sluice_broker_requests_total, ..._request_duration_seconds,
	// ..._request_errors_total, ..._connections), labelled with the
	// broker's id; nil is the broker's (broker.Config.Metrics, itself
	// metrics.Default() when not set), so request and traffic metrics land
	// on one registry.
	Metrics *metrics.Registry
	// Credentials is the SCRAM credential store: SASL listeners
	// authenticate against it, DescribeUserScramCredentials and
	// AlterUserScramCredentials read and change it (the coordinator).
	Credentials cluster.Credentials
	// AuthFailureDelay is connection.failed.authentication.delay.ms, the
	// first penalty of an address that failed to authenticate (see
	// security.Throttle); 0 is DefaultAuthFailureDelay, negative none.
	AuthFailureDelay time.Duration
	// Quotas enforces the client quotas (quotas.go); nil: none.
	Quotas *quota.Manager
	// QuotaStore keeps the client quotas (DescribeClientQuotas,
	// AlterClientQuotas); nil answers them with an error.
	QuotaStore cluster.ClientQuotaStore
}

// Server is the Kafka protocol listener.
type Server struct {
	cfg Config
	log *slog.Logger

	mu        sync.Mutex
	listeners []net.Listener
	names     []string
	lcfgs     []*Listener // each listener's configuration, beside listeners
	conns     map[*conn]struct{}
	closing   bool

	// baseCtx is cancelled at shutdown: parked handlers return early.
	baseCtx    context.Context
	cancelBase context.CancelFunc

	acceptWG sync.WaitGroup
	connWG   sync.WaitGroup

	gate   connGate       // open connections (mu)
	budget *requestBudget // queued.max.request.bytes; nil = unbounded
	// clock is the janitor's coarse time (unix nanos), which connections
	// stamp their activity with; janitorStop ends the janitor.
	clock       atomic.Int64
	janitorStop chan struct{}
	janitorWG   sync.WaitGroup
	logLimit    logLimiter

	// Request metrics, resolved when serving starts (the broker id is
	// known then): mx is this broker's handle, apiMx one per registered
	// API key.
	mx    *metrics.Broker
	apiMx [maxAPIKey]*metrics.API
	// authMx are the authentication counters by listener and mechanism
	// ("SSL" for TLS handshakes), resolved with the others.
	authMx map[string]*metrics.Authentication
	// throttle slows failed authentications per address (sasl.go).
	throttle *security.Throttle
	// throttleMx counts client quota throttle time (quotas.go); nil
	// without quotas.
	throttleMx *metrics.ClientThrottle

	// fetchSessions are the incremental fetch sessions (KIP-227).
	fetchSessions *fetchSessions

	// holdMax is holdMaxHandler (conn.mayHold); tests lengthen it.
	holdMax time.Duration
}

// NewServer returns a server; Serve listens and accepts.
func NewServer(cfg Config) (*Server, error) {
	if cfg.Broker == nil {
		return nil, errors.New("protocol: Broker is required")
	}
	return newServer(cfg)
}

func newServer(cfg Config) (*Server, error) {
	if len(cfg.Listeners) == 0 {
		return nil, errors.New("protocol: at least one listener is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = 100 << 20
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 100
	}
	if cfg.ConnectionsMaxIdle == 0 {
		cfg.ConnectionsMaxIdle = DefaultConnectionsMaxIdle
	}
	if cfg.RequestReadTimeout == 0 {
		cfg.RequestReadTimeout = DefaultRequestReadTimeout
	}
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = DefaultMaxConnections
	}
	if cfg.MaxConnectionsPerIP < 0 || cfg.MaxConnectionsPerIP == 0 && len(cfg.MaxConnectionsPerIPOverrides) == 0 {
		cfg.MaxConnectionsPerIP = DefaultMaxConnectionsPerIP
	}
	if cfg.QueuedMaxRequestBytes == 0 {
		cfg.QueuedMaxRequestBytes = DefaultQueuedMaxRequestBytes
	}
	if cfg.QueuedMaxRequestBytes > 0 && cfg.QueuedMaxRequestBytes < int64(cfg.MaxRequestBytes) {
		return nil, fmt.Errorf("protocol: queued.max.request.bytes %d is below socket.request.max.bytes %d", cfg.QueuedMaxRequestBytes, cfg.MaxRequestBytes)
	}
	overrides, err := parseOverrides(cfg.MaxConnectionsPerIPOverrides)
	if err != nil {
		return nil, err
	}
	if err := checkListenerSecurity(cfg); err != nil {
		return nil, err
	}
	if cfg.AuthFailureDelay == 0 {
		cfg.AuthFailureDelay = DefaultAuthFailureDelay
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		cfg:        cfg,
		log:        cfg.Logger.With("component", "protocol"),
		conns:      map[*conn]struct{}{},
		baseCtx:    ctx,
		cancelBase: cancel,
		gate: connGate{maxTotal: cfg.MaxConnections, maxPerIP: cfg.MaxConnectionsPerIP,
			overrides: overrides, perIP: map[netip.Addr]int{}},
		logLimit:      logLimiter{every: 10 * time.Second},
		throttle:      security.NewThrottle(max(cfg.AuthFailureDelay, 0)),
		fetchSessions: newFetchSessions(fetchSessionSlots),
		holdMax:       holdMaxHandler,
	}
	if cfg.QueuedMaxRequestBytes > 0 {
		s.budget = newRequestBudget(cfg.QueuedMaxRequestBytes)
	}
	s.clock.Store(time.Now().UnixNano())
	return s, nil
}

// Listen binds every listener without accepting yet, so that the bound
// addresses (port 0) are known before the broker registers its endpoints.
func (s *Server) Listen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.listeners) > 0 {
		return nil
	}
	for i := range s.cfg.Listeners {
		l := &s.cfg.Listeners[i]
		ln, err := net.Listen("tcp", l.Addr)
		if err != nil {
			for _, prev := range s.listeners {
				prev.Close()
			}
			s.listeners = nil
			return fmt.Errorf("protocol: listen %s (%s): %w", l.Addr, l.Name, err)
		}
		s.listeners = append(s.listeners, ln)
		s.names = append(s.names, l.Name)
		s.lcfgs = append(s.lcfgs, l)
	}
	return nil
}

// Addrs returns the bound address of each listener by name (after Listen).
func (s *Server) Addrs() map[string]net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]net.Addr, len(s.listeners))
	for i, ln := range s.listeners {
		out[s.names[i]] = ln.Addr()
	}
	return out
}

// Serve starts accepting on every listener (calling Listen first if
// needed) and returns.
func (s *Server) Serve() error {
	if err := s.Listen(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resolveMetrics()
	if s.janitorStop == nil && !s.closing {
		s.janitorStop = make(chan struct{})
		s.janitorWG.Add(1)
		go s.janitor(janitorTick(s.cfg.ConnectionsMaxIdle, s.cfg.RequestReadTimeout), s.janitorStop)
	}
	for i, ln := range s.listeners {
		s.acceptWG.Add(1)
		go s.accept(ln, s.lcfgs[i])
		s.log.Info("listening", "listener", s.names[i], "addr", ln.Addr().String(), "security_protocol", s.lcfgs[i].protocol())
	}
	return nil
}

func (s *Server) accept(ln net.Listener, l *Listener) {
	defer s.acceptWG.Done()
	name := l.Name
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: back off, as
			// net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Warn("accept failed", "listener", name, "err", err, "retry_in", backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		ip, hasIP := remoteIP(nc)
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			nc.Close()
			continue
		}
		// Over max.connections or max.connections.per.ip: closed at
		// once, as Kafka does, before anything is allocated for it.
		if refused, limit := s.gate.admit(ip, hasIP); refused != "" {
			s.mu.Unlock()
			s.refuse(name, refused, limit, nc.RemoteAddr())
			nc.Close()
			continue
		}
		c := newConn(s, nc, l)
		c.ip, c.hasIP = ip, hasIP
		s.conns[c] = struct{}{}
		s.connWG.Add(1)
		s.mu.Unlock()
		go c.serve()
	}
}

// SetConnectionLimits changes max.connections and max.connections.per.ip
// while the server runs (dynamic broker configs): connections accepted from
// now on are counted against the new limits; those open stay, as in Kafka.
// total <= 0 is DefaultMaxConnections; perIP < 0, or 0 without overrides,
// is DefaultMaxConnectionsPerIP (as in Config).
func (s *Server) SetConnectionLimits(total, perIP int) {
	if total <= 0 {
		total = DefaultMaxConnections
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if perIP < 0 || perIP == 0 && len(s.gate.overrides) == 0 {
		perIP = DefaultMaxConnectionsPerIP
	}
	if s.gate.maxTotal != total || s.gate.maxPerIP != perIP {
		s.log.Info("connection limits changed", "max.connections", total, "max.connections.per.ip", perIP)
	}
	s.gate.maxTotal, s.gate.maxPerIP = total, perIP
}

// refuse counts and logs (at most once per 10 s per limit) a connection
// closed at accept.
func (s *Server) refuse(listener, limitKey string, limit int, remote net.Addr) {
	if s.mx != nil {
		s.mx.Listener(listener).Refused(limitKey)
	}
	s.logLimit.log(s.log, slog.LevelWarn, limitKey, "connection refused: limit reached",
		"listener", listener, "remote", remote.String(), "limit", limitKey, "value", limit)
}

func (s *Server) removeConn(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.gate.leave(c.ip, c.hasIP)
	s.mu.Unlock()
	s.connWG.Done()
}

// Shutdown stops accepting, stops reading new requests, lets the requests
// already read finish (parked fetches and produces are woken and answer
// with what they have) and their responses be written, and closes every
// connection. When ctx ends first, the remaining connections are closed
// at once.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		s.connWG.Wait()
		return nil
	}
	s.closing = true
	for _, ln := range s.listeners {
		ln.Close()
	}
	if s.janitorStop != nil {
		close(s.janitorStop)
	}
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	s.acceptWG.Wait()

	for _, c := range conns {
		c.stopReading()
	}
	s.cancelBase()

	done := make(chan struct{})
	go func() {
		s.connWG.Wait()
		close(done)
	}()
	defer s.janitorWG.Wait()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		for c := range s.conns {
			c.nc.Close()
		}
		s.mu.Unlock()
		<-done
		return ctx.Err()
	}
}

// Bound is a server whose listeners are bound but which has no broker yet
// and accepts nothing: the appliance binds first so that ports chosen by the
// system (port 0) are known when the broker registers its endpoints.
type Bound struct{ s *Server }

// Bind binds cfg's listeners (cfg.Broker may be nil).
func Bind(cfg Config) (*Bound, error) {
	s, err := newServer(cfg)
	if err != nil {
		return nil, err
	}
	if err := s.Listen(); err != nil {
		return nil, err
	}
	return &Bound{s: s}, nil
}

// SetConnectionLimits is Server.SetConnectionLimits before Serve.
func (b *Bound) SetConnectionLimits(total, perIP int) { b.s.SetConnectionLimits(total, perIP) }

// Addrs returns the bound address of each listener by name.
func (b *Bound) Addrs() map[string]net.Addr { return b.s.Addrs() }

// Serve starts accepting, with brk serving the requests.
func (b *Bound) Serve(brk *broker.Broker) (*Server, error) {
	if brk == nil {
		return nil, errors.New("protocol: Broker is required")
	}
	b.s.cfg.Broker = brk
	if err := b.s.Serve(); err != nil {
		return nil, err
	}
	return b.s, nil
}

// Close releases the listeners of a Bound that never served.
func (b *Bound) Close() error { return b.s.Close() }

// Close is Shutdown with a five second grace period.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.Shutdown(ctx)
}
