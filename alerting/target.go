package alerting

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// Notifications leave the console for a URL an operator typed, so the
// console must not become a way to reach what only it can reach (server-side
// request forgery): the cloud metadata service on 169.254.169.254, an admin
// port on 127.0.0.1, a database on the private network. The default HTTP
// client therefore
//
//   - never follows a redirect (a 3xx is a failed delivery), so a public
//     receiver cannot bounce the request inward;
//   - refuses to connect to loopback, link-local, private, shared (CGNAT),
//     unspecified and multicast addresses. The check runs on the address
//     being dialled, after DNS resolution, in the dialer's Control hook, so
//     a name that resolves to a public address when the form is saved and
//     to 127.0.0.1 when the notification is sent (DNS rebinding) is refused
//     too;
//   - ignores HTTP(S)_PROXY: through a proxy the dialled address is the
//     proxy's, and the check would say nothing about the target.
//
// Receivers on such addresses (an Alertmanager on the same host, a relay on
// the private network) are allowed by listing them in AllowedTargets
// (alerting.allowed.targets): CIDR prefixes or addresses ("10.1.0.0/16",
// "127.0.0.1") and host:port pairs ("alertmanager.internal:9093",
// "127.0.0.1:9093"). A host name in a host:port entry is trusted to resolve
// where the operator meant, whatever it resolves to.

// Targets is a parsed alerting.allowed.targets list.
type Targets struct {
	prefixes  []netip.Prefix
	addrPorts map[netip.AddrPort]bool
	hostPorts map[string]bool // lower-case "host:port" with a host name
}

// ParseTargets parses alerting.allowed.targets entries: a CIDR prefix, an
// IP address, or host:port (host a name or an address; IPv6 in brackets).
// Empty entries are skipped.
func ParseTargets(entries []string) (*Targets, error) {
	t := &Targets{addrPorts: map[netip.AddrPort]bool{}, hostPorts: map[string]bool{}}
	var errs []error
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if p, err := netip.ParsePrefix(e); err == nil {
			t.prefixes = append(t.prefixes, p.Masked())
			continue
		}
		if a, err := netip.ParseAddr(e); err == nil {
			a = a.Unmap()
			t.prefixes = append(t.prefixes, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		host, port, err := net.SplitHostPort(e)
		if err != nil || host == "" || port == "" {
			errs = append(errs, fmt.Errorf("%q: want a CIDR prefix (10.0.0.0/8), an address (127.0.0.1) or host:port (alertmanager.internal:9093)", e))
			continue
		}
		pn, err := net.LookupPort("tcp", port)
		if err != nil || pn <= 0 || pn > 65535 {
			errs = append(errs, fmt.Errorf("%q: bad port %q", e, port))
			continue
		}
		if a, err := netip.ParseAddr(host); err == nil {
			t.addrPorts[netip.AddrPortFrom(a.Unmap(), uint16(pn))] = true
			continue
		}
		if strings.ContainsAny(host, "/ ") {
			errs = append(errs, fmt.Errorf("%q: bad host name", e))
			continue
		}
		t.hostPorts[strings.ToLower(strings.TrimSuffix(host, "."))+":"+fmt.Sprint(pn)] = true
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("alerting.allowed.targets: %w", errors.Join(errs...))
	}
	return t, nil
}

// allowsHost reports whether host:port (as written in the URL, before
// resolution) is listed by name.
func (t *Targets) allowsHost(host, port string) bool {
	if t == nil || len(t.hostPorts) == 0 {
		return false
	}
	return t.hostPorts[strings.ToLower(strings.TrimSuffix(host, "."))+":"+port]
}

// allowsAddr reports whether the dialled address is listed.
func (t *Targets) allowsAddr(ap netip.AddrPort) bool {
	if t == nil {
		return false
	}
	if t.addrPorts[ap] {
		return true
	}
	for _, p := range t.prefixes {
		if p.Contains(ap.Addr()) {
			return true
		}
	}
	return false
}

// ErrTargetRefused is wrapped by the error of a delivery whose receiver is
// on an address notifications may not reach.
var ErrTargetRefused = errors.New("notifier target refused")

var (
	sharedPrefix = netip.MustParsePrefix("100.64.0.0/10") // RFC 6598 carrier-grade NAT
	thisNetwork  = netip.MustParsePrefix("0.0.0.0/8")     // RFC 1122 "this network"
	nat64Prefix  = netip.MustParsePrefix("64:ff9b::/96")  // RFC 6052 well-known NAT64
	broadcast    = netip.AddrFrom4([4]byte{255, 255, 255, 255})
)

// restricted names why a notification may not go to a, or "" when it may.
func restricted(a netip.Addr) string {
	a = a.Unmap()
	if nat64Prefix.Contains(a) {
		// The IPv4 address a NAT64 gateway would reach.
		b := a.As16()
		return restricted(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
	}
	switch {
	case a.IsLoopback():
		return "a loopback address"
	case a.IsLinkLocalUnicast():
		return "a link-local address (cloud metadata services live there)"
	case a.IsPrivate(), sharedPrefix.Contains(a):
		return "a private address"
	case a.IsUnspecified(), thisNetwork.Contains(a):
		return "an unspecified address"
	case a.IsMulticast(), a.IsLinkLocalMulticast(), a.IsInterfaceLocalMulticast(), a == broadcast:
		return "a multicast or broadcast address"
	}
	return ""
}

// checkDial is the dialer's Control hook: it sees the resolved address
// about to be connected.
func (t *Targets) checkDial(address string) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot check address %q", ErrTargetRefused, address)
	}
	ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	if t.allowsAddr(ap) {
		return nil
	}
	if why := restricted(ap.Addr()); why != "" {
		return fmt.Errorf("%w: %s is %s; list it in alerting.allowed.targets to allow it", ErrTargetRefused, ap, why)
	}
	return nil
}

// dialContext connects to addr ("host:port" from the request URL), checking
// every address it dials unless host:port is allowed by name.
func (t *Targets) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	byName := t.allowsHost(host, port)
	d := net.Dialer{
		Timeout:   10 * time.Second,
		KeepAlive: 30 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			if byName {
				return nil
			}
			return t.checkDial(address)
		},
	}
	return d.DialContext(ctx, network, addr)
}

// errRedirect answers every redirect: notifications are never forwarded.
var errRedirect = errors.New("redirects are not followed")

// NewHTTPClient returns the client notifications are sent with: no
// redirects, no proxy from the environment, and connections only to
// addresses that are public or allowed by t (nil: none allowed).
//
// proxy, when not nil, is the HTTP proxy every notification goes through
// (alerting.proxy): for hosts whose only way out is a proxy on a fixed
// address. The proxy itself is the operator's and is dialled unchecked;
// the target is checked before the request leaves, by resolving its host
// here. The proxy may resolve the name again, so a DNS answer that changes
// between the two is not caught: the proxy's own rules are the last line.
func NewHTTPClient(t *Targets, proxy *url.URL) *http.Client {
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           t.dialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
	}
	var rt http.RoundTripper = tr
	if proxy != nil {
		tr.Proxy = http.ProxyURL(proxy)
		tr.DialContext = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
		rt = proxiedTransport{t: t, next: tr}
	}
	return &http.Client{
		Transport: rt,
		Timeout:   30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// proxiedTransport checks a request's target before handing it to a
// transport that sends it through the proxy.
type proxiedTransport struct {
	t    *Targets
	next http.RoundTripper
}

func (p proxiedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := p.t.checkTarget(req.Context(), req.URL); err != nil {
		return nil, err
	}
	return p.next.RoundTrip(req)
}

// checkTarget resolves u's host and refuses it when any of its addresses is
// internal and not allowed (the check a direct dial makes on the address
// it connects to).
func (t *Targets) checkTarget(ctx context.Context, u *url.URL) error {
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	if t.allowsHost(host, port) {
		return nil
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return fmt.Errorf("resolve %s: %w", host, err)
	}
	pn, _ := net.LookupPort("tcp", port)
	for _, a := range addrs {
		if err := t.checkDial(netip.AddrPortFrom(a.Unmap(), uint16(pn)).String()); err != nil {
			return err
		}
	}
	return nil
}

// ParseProxy checks alerting.proxy: empty (no proxy) or an http:// or
// https:// URL with a host.
func ParseProxy(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("alerting.proxy: %w", fmt.Errorf("%q: want http://host:port or https://host:port", raw))
	}
	return u, nil
}

// MaskURL hides what a notifier URL may carry as a credential (a webhook
// token in its path or query, a user:password) the way secrets are shown:
// the scheme and host stay, the rest becomes "••••" with its last four
// characters when it is long enough to give nothing away. PagerDuty's
// public endpoint is shown as is.
func MaskURL(raw string) string {
	if raw == "" || raw == DefaultPagerDutyURL {
		return raw
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "••••"
	}
	rest := u.EscapedPath()
	if u.RawQuery != "" {
		rest += "?" + u.RawQuery
	}
	if u.Fragment != "" {
		rest += "#" + u.EscapedFragment()
	}
	out := u.Scheme + "://" + u.Host
	if rest == "" || rest == "/" {
		if u.User != nil {
			return u.Scheme + "://••••@" + u.Host + rest
		}
		return out + rest
	}
	return out + "/" + secretHint(strings.TrimPrefix(rest, "/"))
}

// maskURLError replaces the URL in a transport error (*url.Error prints it
// in full: `Post "https://hooks.example/T0K3N": ...`) with its masked form.
func maskURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return &url.Error{Op: ue.Op, URL: MaskURL(ue.URL), Err: ue.Err}
	}
	return err
}
