package zktest

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy is a TCP proxy in front of a server. Block cuts every client off (open
// connections are closed and new ones are closed as soon as they are
// accepted), which is how a test makes ZooKeeper unreachable for one client
// without stopping it: hold it long enough and the server expires the
// client's session. Stall cuts clients off too, but accepts new connections
// and never answers them (nor closes them), as a server that is starting,
// stalled or gone behind a half-open connection does.
type Proxy struct {
	target string
	ln     net.Listener

	mu      sync.Mutex
	blocked bool
	stalled bool
	conns   map[net.Conn]struct{}
	held    map[net.Conn]struct{} // accepted while stalled: kept open, silent
	closed  bool
	wg      sync.WaitGroup
}

// NewProxy listens on a free 127.0.0.1 port and forwards to target. It is
// closed when the test ends.
func NewProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	p, err := StartProxy(target)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(p.Close)
	return p
}

// StartProxy is NewProxy without a test; the caller must Close it.
func StartProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: target, ln: ln, conns: map[net.Conn]struct{}{}, held: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's address, to give clients instead of the server's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.blocked || p.closed {
			p.mu.Unlock()
			c.Close()
			continue
		}
		if p.stalled {
			p.held[c] = struct{}{}
			p.mu.Unlock()
			continue
		}
		p.conns[c] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go p.serve(c)
	}
}

func (p *Proxy) serve(c net.Conn) {
	defer p.wg.Done()
	defer func() {
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
		c.Close()
	}()
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	p.mu.Lock()
	if p.blocked || p.closed {
		p.mu.Unlock()
		up.Close()
		return
	}
	p.conns[up] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.conns, up)
		p.mu.Unlock()
		up.Close()
	}()
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, c); up.Close(); done <- struct{}{} }()
	go func() { io.Copy(c, up); c.Close(); done <- struct{}{} }()
	<-done
	<-done
}

// Block closes every proxied connection and refuses new ones until Unblock.
func (p *Proxy) Block() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocked = true
	for c := range p.conns {
		c.Close()
	}
}

// Stall closes every proxied connection and, until Unblock, accepts new
// ones without ever answering or closing them. Connections accepted while
// stalled stay silent after Unblock too (until the client closes them or the
// proxy is closed).
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stalled = true
	for c := range p.conns {
		c.Close()
	}
}

// Unblock lets clients connect again (after Block or Stall).
func (p *Proxy) Unblock() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocked = false
	p.stalled = false
}

// Close stops the proxy and waits for its goroutines.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	for c := range p.held {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}
