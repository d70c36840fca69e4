package protocol

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/metrics"
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
	errs          *errPlan // where the response's error codes are (metrics)
}

// maxAPIKey bounds the API keys served (Kafka's are below 100).
const maxAPIKey = 128

var (
	apisMu sync.Mutex
	apis   [maxAPIKey]*api // indexed by key; Kafka keys are small
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
	if resp := kmsg.ResponseForKey(a.key); resp != nil {
		a.errs = buildErrPlan(reflect.TypeOf(resp).Elem(), 0)
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

// Request metrics. Every request counts, with its latency from the arrival
// of its frame to its answer being queued, under its API; every non-zero
// error code in the response counts once under its Kafka error name (the
// top-level code and each topic's and partition's, as Kafka's own error
// metrics count them). Where the codes are is worked out once per API key
// from the kmsg response type, so counting allocates nothing.

// errPlan locates the ErrorCode fields of a response struct type: its own,
// and those inside its slices of structs.
type errPlan struct {
	code   int // index of an int16 field ErrorCode, or -1
	arrays []errArray
}

type errArray struct {
	field int
	elem  *errPlan
}

// buildErrPlan returns nil when t holds no error code at any depth.
func buildErrPlan(t reflect.Type, depth int) *errPlan {
	if t.Kind() != reflect.Struct || depth > 4 {
		return nil
	}
	p := &errPlan{code: -1}
	for i := range t.NumField() {
		f := t.Field(i)
		switch {
		case f.Name == "ErrorCode" && f.Type.Kind() == reflect.Int16:
			p.code = i
		case f.Type.Kind() == reflect.Slice:
			if sub := buildErrPlan(f.Type.Elem(), depth+1); sub != nil {
				p.arrays = append(p.arrays, errArray{field: i, elem: sub})
			}
		}
	}
	if p.code < 0 && len(p.arrays) == 0 {
		return nil
	}
	return p
}

func (p *errPlan) walk(v reflect.Value, t *errTally) {
	if p.code >= 0 {
		t.add(int16(v.Field(p.code).Int()))
	}
	for i := range p.arrays {
		a := &p.arrays[i]
		s := v.Field(a.field)
		for j := range s.Len() {
			a.elem.walk(s.Index(j), t)
		}
	}
}

// errTally gathers a response's error codes: the first goes with the
// request's Observe, the others are counted as they come.
type errTally struct {
	api   *metrics.API
	first int16
}

func (t *errTally) add(code int16) {
	switch {
	case code == 0:
	case t.first == 0:
		t.first = code
	default:
		t.api.Failed(code, 1)
	}
}

// tallyResponse counts resp's error codes, found with the plan of its API,
// in mx: all but the first as failures; the first is returned for Observe.
func tallyResponse(a *api, resp kmsg.Response, mx *metrics.API) int16 {
	if a == nil || a.errs == nil {
		return 0
	}
	v := reflect.ValueOf(resp)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return 0
	}
	t := errTally{api: mx}
	a.errs.walk(v.Elem(), &t)
	return t.first
}

// resolveMetrics resolves the metrics handles before the first connection
// (called by Serve; s.mu held).
func (s *Server) resolveMetrics() {
	if s.mx != nil || s.cfg.Broker == nil {
		return
	}
	reg := s.cfg.Metrics
	if reg == nil {
		reg = s.cfg.Broker.Metrics()
	}
	s.mx = reg.Broker(s.cfg.Broker.ID())
	for key, a := range apis {
		if a != nil {
			s.apiMx[key] = s.mx.API(int16(key))
		}
	}
	s.resolveAuthMetrics(reg, s.cfg.Broker.ID())
	if s.cfg.Quotas != nil {
		s.throttleMx = reg.ClientThrottle(s.cfg.Broker.ID())
	}
}
