package protocol

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/broker"
	"github.com/sluice-io/sluice/cluster"
)

// Requests only brokers send: ControlledShutdown (07) for a broker id, and
// Fetch with a replica id (01), which moves the follower's fetch offset,
// the ISR and the high watermark. Kafka allows them to a principal holding
// ClusterAction on the Cluster resource (the brokers' own) and answers
// others CLUSTER_AUTHORIZATION_FAILED (ControlledShutdown) or
// TOPIC_AUTHORIZATION_FAILED on every partition (a follower fetch).
//
// Sluice has no authentication yet, so authorizeClusterAction stands in
// for that check, and is the one place to replace with a ClusterAction ACL
// check once principals exist: the broker id named must be a live
// (registered) broker, and the connection must come from an address that
// broker registered: one its advertised hosts resolve to, or, for a
// connection from this machine (loopback or one of its own addresses), a
// broker whose advertised host is on this machine too (several brokers on
// one host connect to each other from 127.0.0.1 whatever they advertise).

// authorizeClusterAction returns nil when the connection r came in on may
// act as broker brokerID, else a CLUSTER_AUTHORIZATION_FAILED error saying
// why.
func (s *Server) authorizeClusterAction(ctx context.Context, r *Request, brokerID int32) error {
	br, ok := s.cfg.Broker.Image().Broker(brokerID)
	if !ok {
		return &broker.Error{Code: kerr.ClusterAuthorizationFailed, Msg: "broker " + strconv.Itoa(int(brokerID)) + " is not a registered broker"}
	}
	host, _, err := net.SplitHostPort(r.Remote)
	if err != nil {
		host = r.Remote
	}
	from, err := netip.ParseAddr(host)
	if err == nil {
		from = from.Unmap()
		local := isLocalAddr(from)
		for _, ep := range br.Endpoints {
			for _, a := range resolveHost(ctx, ep.Host) {
				if a == from || local && isLocalAddr(a) {
					return nil
				}
			}
		}
	}
	s.log.Warn("refused a request only brokers send: the connection is not from that broker's registered address",
		"broker", brokerID, "remote", r.Remote, "api", kmsg.NameForKey(r.Key), "client_id", r.ClientID)
	return &broker.Error{Code: kerr.ClusterAuthorizationFailed,
		Msg: "the connection from " + r.Remote + " is not from an address broker " + strconv.Itoa(int(brokerID)) + " registered"}
}

// fromBrokerHost reports whether the connection r came in on comes from
// the host of a registered broker: an address one of its advertised hosts
// resolves to, or this machine. It stands in for the console's principal
// on the console's internal topics (broker.ProduceRequest.ConsoleWriter): the console
// runs inside a broker and produces to them from its host. It is the one
// place to become an ACL check once principals exist; until then any
// process on a broker's host passes it.
func (s *Server) fromBrokerHost(ctx context.Context, r *Request) bool {
	if brokerHostAddr(ctx, r.Remote, s.cfg.Broker.Image().Brokers, isLocalAddr) {
		return true
	}
	s.log.Warn("refused a produce to a console topic: the connection is not from a broker's host", "remote", r.Remote, "client_id", r.ClientID)
	return false
}

// brokerHostAddr reports whether remote (host:port) is this machine (local)
// or an address one of brokers' advertised hosts resolves to.
func brokerHostAddr(ctx context.Context, remote string, brokers []cluster.Broker, local func(netip.Addr) bool) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	from, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	from = from.Unmap()
	if local(from) {
		return true
	}
	for _, br := range brokers {
		for _, ep := range br.Endpoints {
			if slices.Contains(resolveHost(ctx, ep.Host), from) {
				return true
			}
		}
	}
	return false
}

// Addresses of advertised host names and of this machine, kept for a while
// so that a follower's fetches cost a map lookup, not a DNS query each.
const (
	addrCacheTTL     = 30 * time.Second
	addrResolveLimit = 2 * time.Second
)

type cachedAddrs struct {
	addrs   []netip.Addr
	expires time.Time
}

var addrCache struct {
	sync.Mutex
	hosts map[string]cachedAddrs // advertised host -> its addresses
	local cachedAddrs            // this machine's interface addresses
}

// resolveHost returns the addresses of host (an IP literal or a name; an
// unresolvable name has none), from the cache when fresh. Only registered
// brokers' hosts are looked up, so the cache stays as small as the
// cluster.
func resolveHost(ctx context.Context, host string) []netip.Addr {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a.Unmap()}
	}
	now := time.Now()
	addrCache.Lock()
	c, ok := addrCache.hosts[host]
	addrCache.Unlock()
	if ok && now.Before(c.expires) {
		return c.addrs
	}
	lctx, cancel := context.WithTimeout(ctx, addrResolveLimit)
	defer cancel()
	found, err := net.DefaultResolver.LookupNetIP(lctx, "ip", host)
	if err != nil && ok {
		found = c.addrs // keep the last answer through a resolver hiccup
	}
	addrs := make([]netip.Addr, 0, len(found))
	for _, a := range found {
		addrs = append(addrs, a.Unmap())
	}
	addrCache.Lock()
	if addrCache.hosts == nil {
		addrCache.hosts = map[string]cachedAddrs{}
	}
	addrCache.hosts[host] = cachedAddrs{addrs: addrs, expires: now.Add(addrCacheTTL)}
	addrCache.Unlock()
	return addrs
}

// isLocalAddr reports whether a is a loopback address or one of this
// machine's interface addresses.
func isLocalAddr(a netip.Addr) bool {
	if a.IsLoopback() {
		return true
	}
	now := time.Now()
	addrCache.Lock()
	defer addrCache.Unlock()
	if now.After(addrCache.local.expires) {
		var addrs []netip.Addr
		if ifs, err := net.InterfaceAddrs(); err == nil {
			for _, ia := range ifs {
				if p, err := netip.ParsePrefix(ia.String()); err == nil {
					addrs = append(addrs, p.Addr().Unmap())
				}
			}
		}
		addrCache.local = cachedAddrs{addrs: addrs, expires: now.Add(addrCacheTTL)}
	}
	return slices.Contains(addrCache.local.addrs, a)
}
