package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"
)

// ServerConfig is the standalone metrics listener. It is off unless Listen is
// set; the console also mounts Handler on its own listener.
type ServerConfig struct {
	// Listen is host:port for a listener of its own (config key
	// metrics.listen), e.g. ":9308". Empty: no standalone listener.
	Listen string
	// Path is where metrics are served (config key metrics.path); default
	// "/metrics".
	Path string
}

// EnsureDefaults fills unset fields.
func (c *ServerConfig) EnsureDefaults() {
	if c.Path == "" {
		c.Path = "/metrics"
	}
}

// Validate reports a configuration that cannot work.
func (c ServerConfig) Validate() error {
	if c.Path != "" && !strings.HasPrefix(c.Path, "/") {
		return fmt.Errorf("metrics.path %q: must start with /", c.Path)
	}
	if c.Listen != "" {
		if _, _, err := net.SplitHostPort(c.Listen); err != nil {
			return fmt.Errorf("metrics.listen %q: want host:port: %w", c.Listen, err)
		}
	}
	return nil
}

// Server is a running standalone metrics listener.
type Server struct {
	ln   net.Listener
	srv  *http.Server
	done chan struct{}
	err  error // set before done is closed
}

// Listen binds cfg.Listen and serves h (usually Registry.Handler) at
// cfg.Path until Close. It returns once the port is bound, so a bad address
// fails here and Addr is usable at once.
func Listen(cfg ServerConfig, h http.Handler, log *slog.Logger) (*Server, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Listen == "" {
		return nil, errors.New("metrics.listen is empty")
	}
	if log == nil {
		log = slog.Default()
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("metrics.listen %s: %w", cfg.Listen, err)
	}
	mux := http.NewServeMux()
	mux.Handle(cfg.Path, h)
	s := &Server{
		ln: ln,
		srv: &http.Server{
			Handler:           mux,
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		},
		done: make(chan struct{}),
	}
	log.Info("metrics listener started", "addr", ln.Addr().String(), "path", cfg.Path)
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.err = err
			log.Error("metrics listener stopped", "err", err)
		}
	}()
	return s, nil
}

// Addr is the bound address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops accepting, lets scrapes in flight finish until ctx ends, and
// waits for the serving goroutine.
func (s *Server) Close(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err != nil {
		s.srv.Close()
	}
	<-s.done
	if err == nil {
		err = s.err
	}
	return err
}
