// Package protocol is Sluice's Kafka wire layer: a TCP listener, request
// framing, dispatch of decoded requests to handlers, and response encoding.
// It turns bytes into calls on package broker (and on the group coordinator
// and the controller) and their results back into bytes; it keeps no
// partition state itself and knows no storage: a handler decodes, checks
// what is the wire's to check (versions, sessions, which broker may send a
// broker-only request, what the request's principal may do: authz.go, with
// Kafka's checks and error codes per API), calls, and encodes.
// Produce and Fetch are broker.Produce and broker.Fetch; the Fetch response
// alone has its own encoder (fetchenc.go), which sends the file regions
// broker.Fetch returns with sendfile. Framing shared with the broker's own
// client (frame size, response header, tagged fields) is internal/kwire's.
//
// # Connections
//
// A connection has no goroutine of its own for reading or writing. The
// goroutine that reads a frame (a 4-byte big-endian size, then a request
// header v1 or v2 and the body) decodes it with kmsg (RequestForKey,
// SetVersion, SkipTags, ReadFrom) and runs its handler itself; a handler
// about to wait calls r.Detach() and a new goroutine carries on reading, so
// later requests are handled meanwhile (pipelining, up to MaxInFlight
// unanswered). Responses go out strictly in request order: whoever finishes
// the oldest unanswered request writes it together with every answer ready
// behind it, in one write (fetch record regions of 32 KiB or more follow by
// sendfile). A pipelining client's requests arrive several to a read; the
// reader handles each request buffered whole before writing the answers of
// those it handled (up to 16, while its handlers take under 200 µs and the
// next request is one that answers promptly or detaches: conn.mayHold), so
// that they too go out in one write. OffsetCommits read together are
// started one after another and their answers postponed (Request.postpone):
// before the reader handles any other request or waits (for the client, or
// for queued.max.request.bytes), it settles them (conn.settle), so their
// __consumer_offsets appends are written together and an OffsetFetch after
// them sees them. A frame larger than socket.request.max.bytes, an unknown API
// key, a version outside the registered range or a body that does not
// decode closes that connection only, with a log line; the broker and other
// connections are unaffected. Responses use response header v1 for flexible
// versions, except ApiVersions, which always answers with header v0.
//
// What a client can make the server hold is bounded (limits.go). A frame's
// buffer is allocated up to frameEagerBytes when its size arrives and grows
// as its bytes do, each step reserved from queued.max.request.bytes (a
// reader that cannot reserve writes the answers it held back, then waits
// without reading); the frame must arrive whole within
// socket.request.read.timeout.ms of its first byte. The
// server's janitor goroutine closes those late frames and the connections
// idle for connections.max.idle.ms; it also keeps the coarse clock that
// connections stamp their activity with, so the data path reads no clock
// and sets no deadline. max.connections and max.connections.per.ip are
// checked at accept, where a connection over a limit is closed before
// anything is allocated for it.
//
// # Handlers
//
// One file per API key, named after the key (00_produce.go, 01_fetch.go, ...),
// opens with a doc block listing the versions it serves and how they behave,
// and registers itself from init:
//
//	func init() { register(19, 0, 7, handleCreateTopics) }
//
//	func handleCreateTopics(ctx context.Context, s *Server, r *Request) (kmsg.Response, error) {
//		req := r.Msg.(*kmsg.CreateTopicsRequest)
//		resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
//		...
//		return resp, nil
//	}
//
// The HandlerFunc contract:
//
//   - r.Msg is the decoded request at r.Version, which the dispatcher has
//     already checked to lie in the registered [min, max] range. Build the
//     response with r.Msg.ResponseKind() so it carries the same version.
//   - Return (resp, nil) to answer. Return (nil, nil) to send no response at
//     all (only Produce with acks=0 does this). Return a non-nil error only
//     for a request that cannot be answered (the connection is closed and the
//     error logged); Kafka errors go in the response's error codes (kerr).
//   - ctx is cancelled when the connection closes or the server shuts down;
//     a handler parked on a long wait must return promptly (with whatever
//     answer it has) when ctx is done.
//   - Handlers run concurrently across connections. On one connection,
//     handler N+1 starts only after handler N returned or called r.Detach():
//     requests are applied in the order they were sent, as Kafka does. A
//     handler that is about to park calls r.Detach() first so the
//     connection's next requests are processed meanwhile; its response is
//     still written in order. The admin requests that wait for the
//     controller or the metadata store detach before they call; Produce and
//     Fetch pass r to broker.Produce and broker.Fetch as their
//     broker.WaitHook, and the broker detaches them only when an acks=all
//     produce or a long-poll fetch must actually wait. The group handlers do
//     not detach (groups.go): a JoinGroup waiting for the rebalance holds up
//     its connection's later requests, as in Kafka.
//   - The request's byte slices (for example Produce records) alias the frame
//     buffer and are valid until the handler returns.
//
// Server state a handler needs is on s: s.cfg.Broker (*broker.Broker:
// topics, partitions, the Produce and Fetch operations, the error table
// broker.ErrorCode), s.cfg.Groups (GroupCoordinator, nil when not wired),
// s.cfg.Controller (Controller, the controller-only APIs; nil when not
// wired), s.log (a *slog.Logger), s.cfg.Broker.ID() (this broker's id).
//
// ApiVersions (18_api_versions.go) is built from the registry, so only
// registered APIs are advertised, with exactly their registered ranges.
//
// Requests only brokers send (ControlledShutdown, a Fetch with a replica
// id) pass s.authorizeClusterAction (cluster_action.go), the one check to
// become Kafka's ClusterAction ACL once principals exist. Counts a client
// sends are bounded before anything is allocated for them: an admin
// request of more than cluster.MaxRecordsPerRequest metadata records is
// refused whole (broker.ErrExcessiveBatch), and a resource named twice is
// described once. FuzzHandlers (handlers_fuzz_test.go) runs every served
// (key, version) through its handler against a real broker and bounds
// what one request may allocate.
package protocol
