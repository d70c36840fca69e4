package schemareg

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-io/sluice/schemareg/schema"
)

// ContentType is the registry API's media type.
const ContentType = "application/vnd.schemaregistry.v1+json"

// Headers between the hosts of a cluster: a forwarded write carries
// forwardedHeader (so the leader never forwards it again), and a write's
// answer carries the _schemas offset it ended at, which the forwarding
// host waits for before it answers (read-your-writes).
const (
	forwardedHeader = "X-Sluice-Forwarded"
	offsetHeader    = "X-Sluice-Schemas-Offset"
)

// Role is what a user may do with the registry.
type Role int

// The roles: none, read (GET, lookups, compatibility checks), write
// (registrations, deletes, config and mode changes) as well.
const (
	RoleNone Role = iota
	RoleRead
	RoleWrite
)

// Authenticator checks HTTP basic credentials and returns the user's role
// (RoleNone, nil for wrong credentials).
type Authenticator func(ctx context.Context, user, password string) (Role, error)

// authCache remembers successful checks for a minute, so that a client
// sending the same credentials on every request does not pay a bcrypt
// comparison each time. Keys are hashes of user and password.
type authCache struct {
	mu sync.Mutex
	m  map[[32]byte]authEntry
}

type authEntry struct {
	role    Role
	expires time.Time
}

func newAuthCache() *authCache { return &authCache{m: map[[32]byte]authEntry{}} }

func (c *authCache) check(ctx context.Context, fn Authenticator, user, pw string) (Role, error) {
	h := sha256.Sum256([]byte(user + "\x00" + pw))
	now := time.Now()
	c.mu.Lock()
	e, ok := c.m[h]
	c.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.role, nil
	}
	role, err := fn(ctx, user, pw)
	if err != nil || role == RoleNone {
		return RoleNone, err
	}
	c.mu.Lock()
	if len(c.m) >= 1000 {
		clear(c.m)
	}
	c.m[h] = authEntry{role: role, expires: now.Add(time.Minute)}
	c.mu.Unlock()
	return role, nil
}

type handlerFunc func(w http.ResponseWriter, req *http.Request) (any, error)

type route struct {
	pattern string
	role    Role
	write   bool // forwarded to the leader
	fn      handlerFunc
}

// Handler returns the REST API.
func (r *Registry) Handler() http.Handler {
	mux := http.NewServeMux()
	routes := []route{
		{"GET /{$}", RoleRead, false, func(http.ResponseWriter, *http.Request) (any, error) { return struct{}{}, nil }},
		{"GET /schemas/types", RoleRead, false, r.getTypes},
		{"GET /schemas", RoleRead, false, r.getSchemas},
		{"GET /schemas/ids/{id}", RoleRead, false, r.getSchemaByID},
		{"GET /schemas/ids/{id}/schema", RoleRead, false, r.getSchemaByIDRaw},
		{"GET /schemas/ids/{id}/versions", RoleRead, false, r.getSchemaVersions},
		{"GET /schemas/ids/{id}/subjects", RoleRead, false, r.getSchemaSubjects},
		{"GET /subjects", RoleRead, false, r.getSubjects},
		{"GET /subjects/{subject}/versions", RoleRead, false, r.getVersions},
		{"GET /subjects/{subject}/versions/{version}", RoleRead, false, r.getVersion},
		{"GET /subjects/{subject}/versions/{version}/schema", RoleRead, false, r.getVersionRaw},
		{"GET /subjects/{subject}/versions/{version}/referencedby", RoleRead, false, r.getReferencedBy},
		{"POST /subjects/{subject}/versions", RoleWrite, true, r.postVersion},
		{"POST /subjects/{subject}", RoleRead, false, r.postLookup},
		{"DELETE /subjects/{subject}", RoleWrite, true, r.deleteSubjectHTTP},
		{"DELETE /subjects/{subject}/versions/{version}", RoleWrite, true, r.deleteVersionHTTP},
		{"POST /compatibility/subjects/{subject}/versions/{version}", RoleRead, false, r.postCompat},
		{"POST /compatibility/subjects/{subject}/versions", RoleRead, false, r.postCompat},
		{"GET /config", RoleRead, false, r.getConfig},
		{"PUT /config", RoleWrite, true, r.putConfig},
		{"DELETE /config", RoleWrite, true, r.deleteConfig},
		{"GET /config/{subject}", RoleRead, false, r.getConfig},
		{"PUT /config/{subject}", RoleWrite, true, r.putConfig},
		{"DELETE /config/{subject}", RoleWrite, true, r.deleteConfig},
		{"GET /mode", RoleRead, false, r.getMode},
		{"PUT /mode", RoleWrite, true, r.putMode},
		{"GET /mode/{subject}", RoleRead, false, r.getMode},
		{"PUT /mode/{subject}", RoleWrite, true, r.putMode},
		{"DELETE /mode/{subject}", RoleWrite, true, r.deleteMode},
	}
	for _, rt := range routes {
		mux.Handle(rt.pattern, r.wrap(rt))
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, req *http.Request) {
		start := time.Now()
		e := newErr(http.StatusNotFound, CodeNotFound, "HTTP 404 Not Found")
		writeJSON(w, e.Status, e)
		r.observe(req.Method, "", e.Status, start)
	})
	return mux
}

func (r *Registry) observe(method, endpoint string, status int, start time.Time) {
	if r.cfg.Metrics != nil {
		r.cfg.Metrics.ObserveHTTP(method, endpoint, status, time.Since(start))
	}
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func (r *Registry) wrap(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		defer func() { r.observe(req.Method, rt.pattern, sw.status, start) }()
		if r.cfg.Auth != nil && !(rt.write && r.peerSigned(req)) {
			user, pw, ok := req.BasicAuth()
			role := RoleNone
			var err error
			if ok {
				role, err = r.authCache.check(req.Context(), r.cfg.Auth, user, pw)
			}
			if err != nil {
				writeErr(sw, newErr(http.StatusInternalServerError, codeInternal, "authentication failed: %v", err))
				return
			}
			if role == RoleNone {
				sw.Header().Set("WWW-Authenticate", `Basic realm="Sluice schema registry"`)
				writeErr(sw, newErr(http.StatusUnauthorized, CodeUnauthorized, "Unauthorized"))
				return
			}
			if role < rt.role {
				writeErr(sw, newErr(http.StatusForbidden, CodeForbidden, "User %s may not %s %s (needs the operator or admin role)", user, req.Method, req.URL.Path))
				return
			}
		}
		req.Body = http.MaxBytesReader(sw, req.Body, r.cfg.MaxRequestBytes)
		if rt.write && !r.isLeader() {
			if req.Header.Get(forwardedHeader) != "" {
				writeErr(sw, errNotLeader)
				return
			}
			r.forward(sw, req)
			return
		}
		ctx, cancel := context.WithTimeout(req.Context(), r.cfg.WriteTimeout)
		defer cancel()
		req = req.WithContext(ctx)
		v, err := rt.fn(sw, req)
		if err != nil {
			writeErr(sw, asError(err))
			return
		}
		if rt.write {
			r.state.mu.RLock()
			off := r.state.next - 1
			r.state.mu.RUnlock()
			sw.Header().Set(offsetHeader, strconv.FormatInt(off, 10))
		}
		if raw, ok := v.(rawText); ok {
			sw.Header().Set("Content-Type", "text/plain; charset=utf-8")
			sw.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(sw, string(raw))
			return
		}
		writeJSON(sw, http.StatusOK, v)
	})
}

// forward sends a write to the leader and relays its answer, once the
// local view has read what the leader wrote.
func (r *Registry) forward(w http.ResponseWriter, req *http.Request) {
	leader := ""
	if r.cfg.Leader != nil {
		leader = r.cfg.Leader.LeaderURL()
	}
	if leader == "" {
		writeErr(w, newErr(http.StatusInternalServerError, CodeUnknownLeader, "Request failed since the schema registry's leader is unknown"))
		return
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		writeErr(w, bodyErr(err))
		return
	}
	ctx, cancel := context.WithTimeout(req.Context(), r.cfg.WriteTimeout)
	defer cancel()
	freq, err := http.NewRequestWithContext(ctx, req.Method, strings.TrimSuffix(leader, "/")+req.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		writeErr(w, newErr(http.StatusInternalServerError, CodeRequestForwardingFailed, "Error while forwarding the request to the leader: %v", err))
		return
	}
	for _, h := range []string{"Content-Type", "Accept", "Authorization"} {
		if v := req.Header.Get(h); v != "" {
			freq.Header.Set(h, v)
		}
	}
	freq.Header.Set(forwardedHeader, "1")
	resp, err := r.cfg.Forward.Do(freq)
	if err != nil {
		writeErr(w, newErr(http.StatusInternalServerError, CodeRequestForwardingFailed, "Error while forwarding the request to the leader %s: %v", leader, err))
		return
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, r.cfg.MaxRequestBytes))
	if err != nil {
		writeErr(w, newErr(http.StatusInternalServerError, CodeRequestForwardingFailed, "Error while reading the leader's answer: %v", err))
		return
	}
	if off, err := strconv.ParseInt(resp.Header.Get(offsetHeader), 10, 64); err == nil {
		if err := r.WaitFor(ctx, off); err != nil {
			writeErr(w, asError(err))
			return
		}
	}
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(out)
}

type rawText string

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error_code":500,"message":"encoding the answer failed"}`)
	}
	w.Header().Set("Content-Type", ContentType)
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func writeErr(w http.ResponseWriter, e *Error) { writeJSON(w, e.Status, e) }

func bodyErr(err error) *Error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return newErr(http.StatusRequestEntityTooLarge, CodeRequestTooLarge, "Request body larger than %d bytes", mbe.Limit)
	}
	return newErr(http.StatusUnprocessableEntity, CodeUnprocessable, "Unrecognized request body: %v", err)
}

func decodeBody(req *http.Request, v any) error {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return bodyErr(err)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return newErr(http.StatusUnprocessableEntity, CodeUnprocessable, "Unrecognized field or malformed JSON: %v", err)
	}
	return nil
}

func boolParam(req *http.Request, name string) bool {
	v, _ := strconv.ParseBool(req.URL.Query().Get(name))
	return v
}

func parseVersion(s string) (int, error) {
	if s == "latest" || s == "-1" {
		return -1, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil || v <= 0 {
		return 0, errInvalidVersion(s)
	}
	return v, nil
}

func parseID(req *http.Request) (int, error) {
	id, err := strconv.Atoi(req.PathValue("id"))
	if err != nil || id <= 0 {
		return 0, newErr(http.StatusNotFound, CodeSchemaNotFound, "Schema %s not found", req.PathValue("id"))
	}
	return id, nil
}

// versionResponse is a subject version as the API shows it.
type versionResponse struct {
	Subject    string             `json:"subject"`
	Version    int                `json:"version"`
	ID         int                `json:"id"`
	SchemaType string             `json:"schemaType,omitempty"`
	References []schema.Reference `json:"references,omitempty"`
	Schema     string             `json:"schema"`
	Deleted    bool               `json:"deleted,omitempty"`
}

func toResponse(sv *SchemaValue, showDeleted bool) versionResponse {
	st := sv.SchemaType
	if st == string(schema.Avro) {
		st = ""
	}
	return versionResponse{Subject: sv.Subject, Version: sv.Version, ID: sv.ID, SchemaType: st,
		References: sv.References, Schema: sv.Schema, Deleted: showDeleted && sv.Deleted}
}

func (r *Registry) getTypes(http.ResponseWriter, *http.Request) (any, error) {
	return schema.Types, nil
}

func (r *Registry) getSchemas(_ http.ResponseWriter, req *http.Request) (any, error) {
	prefix := req.URL.Query().Get("subjectPrefix")
	deleted, latestOnly := boolParam(req, "deleted"), boolParam(req, "latestOnly")
	out := []versionResponse{}
	for _, s := range r.state.subjectNames(prefix, deleted, false) {
		r.state.mu.RLock()
		ss := r.state.subjects[s]
		var vs []*SchemaValue
		if ss != nil {
			for _, v := range ss.sortedVersions(deleted) {
				vs = append(vs, ss.versions[v])
			}
		}
		r.state.mu.RUnlock()
		if latestOnly && len(vs) > 0 {
			vs = vs[len(vs)-1:]
		}
		for _, sv := range vs {
			out = append(out, toResponse(sv, deleted))
		}
	}
	return out, nil
}

func (r *Registry) schemaForID(req *http.Request) (*SchemaValue, error) {
	id, err := parseID(req)
	if err != nil {
		return nil, err
	}
	sv := r.state.schemaByID(id, req.URL.Query().Get("subject"))
	if sv == nil {
		return nil, errSchemaIDNotFound(id)
	}
	return sv, nil
}

func (r *Registry) getSchemaByID(_ http.ResponseWriter, req *http.Request) (any, error) {
	sv, err := r.schemaForID(req)
	if err != nil {
		return nil, err
	}
	resp := struct {
		SchemaType string             `json:"schemaType,omitempty"`
		Schema     string             `json:"schema"`
		References []schema.Reference `json:"references,omitempty"`
		MaxID      *int               `json:"maxId,omitempty"`
	}{SchemaType: toResponse(sv, false).SchemaType, Schema: sv.Schema, References: sv.References}
	if boolParam(req, "fetchMaxId") {
		r.state.mu.RLock()
		m := r.state.maxID
		r.state.mu.RUnlock()
		resp.MaxID = &m
	}
	return resp, nil
}

func (r *Registry) getSchemaByIDRaw(_ http.ResponseWriter, req *http.Request) (any, error) {
	sv, err := r.schemaForID(req)
	if err != nil {
		return nil, err
	}
	return rawText(sv.Schema), nil
}

type subjectVersion struct {
	Subject string `json:"subject"`
	Version int    `json:"version"`
}

func (r *Registry) getSchemaVersions(_ http.ResponseWriter, req *http.Request) (any, error) {
	id, err := parseID(req)
	if err != nil {
		return nil, err
	}
	uses := r.state.usesOf(id, boolParam(req, "deleted"))
	if len(uses) == 0 && r.state.schemaByID(id, "") == nil {
		return nil, errSchemaIDNotFound(id)
	}
	out := []subjectVersion{}
	for _, u := range uses {
		out = append(out, subjectVersion{u.Subject, u.Version})
	}
	return out, nil
}

func (r *Registry) getSchemaSubjects(_ http.ResponseWriter, req *http.Request) (any, error) {
	id, err := parseID(req)
	if err != nil {
		return nil, err
	}
	uses := r.state.usesOf(id, boolParam(req, "deleted"))
	if len(uses) == 0 && r.state.schemaByID(id, "") == nil {
		return nil, errSchemaIDNotFound(id)
	}
	out := []string{}
	for _, u := range uses {
		if len(out) == 0 || out[len(out)-1] != u.Subject {
			out = append(out, u.Subject)
		}
	}
	return out, nil
}

func (r *Registry) getSubjects(_ http.ResponseWriter, req *http.Request) (any, error) {
	return r.state.subjectNames(req.URL.Query().Get("subjectPrefix"), boolParam(req, "deleted"), boolParam(req, "deletedOnly")), nil
}

func (r *Registry) getVersions(_ http.ResponseWriter, req *http.Request) (any, error) {
	subject := req.PathValue("subject")
	deleted := boolParam(req, "deleted")
	r.state.mu.RLock()
	ss := r.state.subjects[subject]
	var vs []int
	if ss != nil {
		vs = ss.sortedVersions(deleted)
	}
	r.state.mu.RUnlock()
	if len(vs) == 0 {
		return nil, errSubjectNotFound(subject)
	}
	return vs, nil
}

func (r *Registry) versionOf(req *http.Request) (*SchemaValue, error) {
	subject := req.PathValue("subject")
	v, err := parseVersion(req.PathValue("version"))
	if err != nil {
		return nil, err
	}
	sv, ok := r.state.version(subject, v, boolParam(req, "deleted"))
	if !ok {
		return nil, errSubjectNotFound(subject)
	}
	if sv == nil {
		if v == -1 {
			return nil, errSubjectNotFound(subject)
		}
		return nil, errVersionNotFound(v)
	}
	return sv, nil
}

func (r *Registry) getVersion(_ http.ResponseWriter, req *http.Request) (any, error) {
	sv, err := r.versionOf(req)
	if err != nil {
		return nil, err
	}
	return toResponse(sv, boolParam(req, "deleted")), nil
}

func (r *Registry) getVersionRaw(_ http.ResponseWriter, req *http.Request) (any, error) {
	sv, err := r.versionOf(req)
	if err != nil {
		return nil, err
	}
	return rawText(sv.Schema), nil
}

func (r *Registry) getReferencedBy(_ http.ResponseWriter, req *http.Request) (any, error) {
	sv, err := r.versionOf(req)
	if err != nil {
		return nil, err
	}
	return r.state.referencedBy(sv.Subject, sv.Version, false), nil
}

func (r *Registry) postVersion(_ http.ResponseWriter, req *http.Request) (any, error) {
	var body SchemaRequest
	if err := decodeBody(req, &body); err != nil {
		return nil, err
	}
	id, err := r.Register(req.Context(), req.PathValue("subject"), body)
	if err != nil {
		return nil, err
	}
	return map[string]int{"id": id}, nil
}

func (r *Registry) postLookup(_ http.ResponseWriter, req *http.Request) (any, error) {
	var body SchemaRequest
	if err := decodeBody(req, &body); err != nil {
		return nil, err
	}
	sv, err := r.Lookup(req.PathValue("subject"), body, boolParam(req, "deleted"))
	if err != nil {
		return nil, err
	}
	return toResponse(sv, false), nil
}

func (r *Registry) postCompat(_ http.ResponseWriter, req *http.Request) (any, error) {
	v := 0
	if s := req.PathValue("version"); s != "" {
		var err error
		if v, err = parseVersion(s); err != nil {
			return nil, err
		}
	}
	var body SchemaRequest
	if err := decodeBody(req, &body); err != nil {
		return nil, err
	}
	msgs, err := r.CheckCompatibility(req.PathValue("subject"), v, body)
	if err != nil {
		return nil, err
	}
	resp := struct {
		IsCompatible bool     `json:"is_compatible"`
		Messages     []string `json:"messages,omitempty"`
	}{IsCompatible: len(msgs) == 0}
	if boolParam(req, "verbose") {
		resp.Messages = msgs
		if resp.Messages == nil {
			resp.Messages = []string{}
		}
	}
	return resp, nil
}

func (r *Registry) deleteSubjectHTTP(_ http.ResponseWriter, req *http.Request) (any, error) {
	return r.deleteSubject(req.Context(), req.PathValue("subject"), boolParam(req, "permanent"))
}

func (r *Registry) deleteVersionHTTP(_ http.ResponseWriter, req *http.Request) (any, error) {
	v, err := parseVersion(req.PathValue("version"))
	if err != nil {
		return nil, err
	}
	return r.deleteVersion(req.Context(), req.PathValue("subject"), v, boolParam(req, "permanent"))
}

type levelResponse struct {
	CompatibilityLevel string `json:"compatibilityLevel"`
}

func (r *Registry) getConfig(_ http.ResponseWriter, req *http.Request) (any, error) {
	subject := req.PathValue("subject")
	if subject == "" {
		return levelResponse{r.state.compatibility("\x00")}, nil
	}
	r.state.mu.RLock()
	var level string
	if ss := r.state.subjects[subject]; ss != nil {
		level = ss.config
	}
	r.state.mu.RUnlock()
	if level == "" {
		if !boolParam(req, "defaultToGlobal") {
			return nil, newErr(http.StatusNotFound, CodeSubjectCompatNotConfigured,
				"Subject '%s' does not have subject-level compatibility configured", subject)
		}
		level = r.state.compatibility("\x00")
	}
	return levelResponse{level}, nil
}

func (r *Registry) putConfig(_ http.ResponseWriter, req *http.Request) (any, error) {
	var body struct {
		Compatibility string `json:"compatibility"`
	}
	if err := decodeBody(req, &body); err != nil {
		return nil, err
	}
	level, ok := parseLevel(body.Compatibility)
	if !ok {
		return nil, errInvalidCompatibility()
	}
	subject := req.PathValue("subject")
	if subject != "" {
		if err := validSubject(subject); err != nil {
			return nil, err
		}
	}
	if err := r.SetConfig(req.Context(), subject, level); err != nil {
		return nil, err
	}
	return map[string]string{"compatibility": level}, nil
}

func (r *Registry) deleteConfig(_ http.ResponseWriter, req *http.Request) (any, error) {
	subject := req.PathValue("subject")
	prev := r.state.compatibility("\x00")
	if subject != "" {
		r.state.mu.RLock()
		ss := r.state.subjects[subject]
		exists := ss != nil
		if exists && ss.config != "" {
			prev = ss.config
		}
		r.state.mu.RUnlock()
		if !exists {
			return nil, errSubjectNotFound(subject)
		}
	}
	if err := r.SetConfig(req.Context(), subject, ""); err != nil {
		return nil, err
	}
	return levelResponse{prev}, nil
}

type modeResponse struct {
	Mode string `json:"mode"`
}

func (r *Registry) getMode(_ http.ResponseWriter, req *http.Request) (any, error) {
	subject := req.PathValue("subject")
	if subject == "" {
		return modeResponse{r.state.modeOf("\x00")}, nil
	}
	r.state.mu.RLock()
	var mode string
	if ss := r.state.subjects[subject]; ss != nil {
		mode = ss.mode
	}
	r.state.mu.RUnlock()
	if mode == "" {
		if !boolParam(req, "defaultToGlobal") {
			return nil, newErr(http.StatusNotFound, CodeSubjectModeNotConfigured,
				"Subject '%s' does not have subject-level mode configured", subject)
		}
		mode = r.state.modeOf("\x00")
	}
	return modeResponse{mode}, nil
}

func (r *Registry) putMode(_ http.ResponseWriter, req *http.Request) (any, error) {
	var body struct {
		Mode string `json:"mode"`
	}
	if err := decodeBody(req, &body); err != nil {
		return nil, err
	}
	mode := strings.ToUpper(strings.TrimSpace(body.Mode))
	valid := false
	for _, m := range modes {
		valid = valid || m == mode
	}
	if !valid {
		return nil, errInvalidMode(body.Mode)
	}
	subject := req.PathValue("subject")
	if subject != "" {
		if err := validSubject(subject); err != nil {
			return nil, err
		}
	}
	if err := r.SetMode(req.Context(), subject, mode); err != nil {
		return nil, err
	}
	return modeResponse{mode}, nil
}

func (r *Registry) deleteMode(_ http.ResponseWriter, req *http.Request) (any, error) {
	subject := req.PathValue("subject")
	prev := r.state.modeOf(subject)
	if err := r.SetMode(req.Context(), subject, ""); err != nil {
		return nil, err
	}
	return modeResponse{prev}, nil
}
