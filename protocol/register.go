package protocol

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// HandlerFunc handles one decoded request; see the package documentation for
// the contract (ordering, Detach, what a nil response or an error means).
type HandlerFunc func(ctx context.Context, s *Server, r *Request) (kmsg.Response, error)

// streamHandlerFunc is the variant for responses kmsg cannot encode: Fetch,
// whose record bytes go from the segment file to the socket by sendfile.
type streamHandlerFunc func(ctx context.Context, s *Server, r *Request) (streamResponse, error)

// api is one registered API key.
type api struct {
	key, min, max int16
	handler       HandlerFunc
	stream        streamHandlerFunc
}

var (
	apisMu sync.Mutex
	apis   [128]*api // indexed by key; Kafka keys are small
)

// register adds the handler for key, serving versions minVersion through
// maxVersion, and advertises that range in ApiVersions. Call it from init in
// the API's own file. It panics on a duplicate key or a bad range, so a wiring
// mistake fails at start-up, never at request time.
func register(key, minVersion, maxVersion int16, h HandlerFunc) {
	add(&api{key: key, min: minVersion, max: maxVersion, handler: h})
}

func registerStream(key, minVersion, maxVersion int16, h streamHandlerFunc) {
	add(&api{key: key, min: minVersion, max: maxVersion, stream: h})
}

func add(a *api) {
	apisMu.Lock()
	defer apisMu.Unlock()
	if a.key < 0 || int(a.key) >= len(apis) || a.min < 0 || a.max < a.min {
		panic(fmt.Sprintf("protocol: invalid registration key=%d min=%d max=%d", a.key, a.min, a.max))
	}
	if apis[a.key] != nil {
		panic(fmt.Sprintf("protocol: API key %d registered twice", a.key))
	}
	if req := kmsg.RequestForKey(a.key); req == nil || req.MaxVersion() < a.max {
		panic(fmt.Sprintf("protocol: kmsg cannot decode key %d up to version %d", a.key, a.max))
	}
	apis[a.key] = a
}

// lookup returns the registered API for key, or nil. Registration happens
// only from init functions, which complete before any connection is served,
// so the table is read without the lock.
func lookup(key int16) *api {
	if key < 0 || int(key) >= len(apis) {
		return nil
	}
	return apis[key]
}

// registered returns the advertised ranges sorted by key (ApiVersions).
func registered() []kmsg.ApiVersionsResponseApiKey {
	apisMu.Lock()
	defer apisMu.Unlock()
	var out []kmsg.ApiVersionsResponseApiKey
	for _, a := range apis {
		if a == nil {
			continue
		}
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = a.key, a.min, a.max
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ApiKey < out[j].ApiKey })
	return out
}
