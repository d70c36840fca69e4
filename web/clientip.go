package web

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/gofiber/fiber/v2"
)

// The client address of a request is what the sign-in backoff counts and
// the audit log records. It is the TCP peer, unless the peer is one of
// console.trusted.proxies: then it is the rightmost X-Forwarded-For entry
// that is not itself a trusted proxy. Rightmost, because everything left of
// what the nearest proxy appended was written by the client and may be
// forged; X-Forwarded-For from any other peer is ignored for the same
// reason.

// trustedProxies is console.trusted.proxies: addresses and CIDR prefixes.
type trustedProxies []netip.Prefix

func parseTrustedProxies(list []string) (trustedProxies, error) {
	var out trustedProxies
	var errs []error
	for _, e := range list {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if p, err := netip.ParsePrefix(e); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(e)
		if err != nil {
			errs = append(errs, fmt.Errorf("%q is not an address or a CIDR prefix", e))
			continue
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, errors.Join(errs...)
}

// ValidateTrustedProxies checks console.trusted.proxies: every entry an
// address or a CIDR prefix.
func ValidateTrustedProxies(list []string) error {
	_, err := parseTrustedProxies(list)
	return err
}

func (t trustedProxies) trusts(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range t {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// maxForwardedHops bounds how much of X-Forwarded-For is looked at.
const maxForwardedHops = 32

// clientAddr works out the request's client address (see above).
func (t trustedProxies) clientAddr(c *fiber.Ctx) string {
	peerIP := c.Context().RemoteIP()
	peer, ok := netip.AddrFromSlice(peerIP)
	if !ok {
		return peerIP.String()
	}
	peer = peer.Unmap()
	if len(t) == 0 || !t.trusts(peer) {
		return peer.String()
	}
	// Every X-Forwarded-For line, in order, as one list.
	var hops []string
	for _, v := range c.Request().Header.PeekAll(fiber.HeaderXForwardedFor) {
		for _, h := range strings.Split(string(v), ",") {
			hops = append(hops, strings.TrimSpace(h))
		}
	}
	client := peer
	for i, n := len(hops)-1, 0; i >= 0 && n < maxForwardedHops; i, n = i-1, n+1 {
		a, err := netip.ParseAddr(hops[i])
		if err != nil {
			if ap, perr := netip.ParseAddrPort(hops[i]); perr == nil {
				a, err = ap.Addr(), nil
			}
		}
		if err != nil {
			// Not an address (a forged or obfuscated entry): the last
			// trusted hop is as far as the chain can be believed.
			break
		}
		client = a.Unmap()
		if !t.trusts(client) {
			break
		}
	}
	return client.String()
}

// ClientIP is the address of the request's client: the TCP peer, or the
// address a trusted proxy forwarded (console.trusted.proxies).
func ClientIP(c *fiber.Ctx) string {
	if ip, ok := c.Locals(localsClientIP).(string); ok {
		return ip
	}
	if s := serverOf(c); s != nil {
		return s.proxies.clientAddr(c)
	}
	return c.Context().RemoteIP().String()
}
