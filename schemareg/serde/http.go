package serde

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-io/sluice/schemareg/schema"
)

// HTTPSource reads schemas from a Confluent-compatible registry's REST API
// (Sluice's, Confluent's, Redpanda's, ...).
type HTTPSource struct {
	base     string
	client   *http.Client
	User     string // HTTP basic credentials, when the registry asks for them
	Password string
}

// NewHTTPSource returns a source reading from baseURL (e.g.
// http://localhost:8081). A nil client uses one with a 15s timeout.
func NewHTTPSource(baseURL string, client *http.Client) *HTTPSource {
	if client == nil {
		client = &http.Client{Timeout: 15 * time.Second}
	}
	return &HTTPSource{base: strings.TrimSuffix(baseURL, "/"), client: client}
}

type apiSchema struct {
	Subject    string             `json:"subject"`
	Version    int                `json:"version"`
	ID         int                `json:"id"`
	SchemaType string             `json:"schemaType"`
	References []schema.Reference `json:"references"`
	Schema     string             `json:"schema"`
}

func (h *HTTPSource) get(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.base+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/vnd.schemaregistry.v1+json, application/json")
	if h.User != "" {
		req.SetBasicAuth(h.User, h.Password)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, schema.MaxSchemaBytes+1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode == http.StatusNotFound {
		return fmt.Errorf("%w: %s", ErrNotFound, strings.TrimSpace(string(body)))
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, strings.TrimSpace(string(body)))
	}
	return json.Unmarshal(body, v)
}

func (h *HTTPSource) resolve(ctx context.Context, refs []schema.Reference, depth int) ([]schema.Resolved, error) {
	if depth > schema.MaxReferenceDeep {
		return nil, fmt.Errorf("references nest deeper than %d", schema.MaxReferenceDeep)
	}
	var out []schema.Resolved
	for _, r := range refs {
		var s apiSchema
		if err := h.get(ctx, "/subjects/"+url.PathEscape(r.Subject)+"/versions/"+strconv.Itoa(r.Version), &s); err != nil {
			return nil, fmt.Errorf("reference %s: %w", r.Name, err)
		}
		sub, err := h.resolve(ctx, s.References, depth+1)
		if err != nil {
			return nil, err
		}
		t, _ := schema.ParseType(s.SchemaType)
		out = append(out, schema.Resolved{Reference: r, Source: schema.Source{Type: t, Text: s.Schema, References: sub}})
	}
	return out, nil
}

func (h *HTTPSource) parse(ctx context.Context, s apiSchema) (*Registered, error) {
	refs, err := h.resolve(ctx, s.References, 0)
	if err != nil {
		return nil, err
	}
	t, err := schema.ParseType(s.SchemaType)
	if err != nil {
		return nil, err
	}
	p, err := schema.Parse(schema.Source{Type: t, Text: s.Schema, References: refs})
	if err != nil {
		return nil, err
	}
	return &Registered{ID: s.ID, Subject: s.Subject, Version: s.Version, Schema: p}, nil
}

// SchemaByID implements Source: GET /schemas/ids/{id}, and
// /schemas/ids/{id}/versions for a subject and version to report.
func (h *HTTPSource) SchemaByID(ctx context.Context, id int) (*Registered, error) {
	var s apiSchema
	if err := h.get(ctx, "/schemas/ids/"+strconv.Itoa(id), &s); err != nil {
		return nil, err
	}
	s.ID = id
	var uses []struct {
		Subject string `json:"subject"`
		Version int    `json:"version"`
	}
	if err := h.get(ctx, "/schemas/ids/"+strconv.Itoa(id)+"/versions", &uses); err == nil && len(uses) > 0 {
		s.Subject, s.Version = uses[0].Subject, uses[0].Version
	}
	return h.parse(ctx, s)
}

// SchemaBySubject implements Source: GET /subjects/{s}/versions/{v}.
func (h *HTTPSource) SchemaBySubject(ctx context.Context, subject string, version int) (*Registered, error) {
	v := "latest"
	if version > 0 {
		v = strconv.Itoa(version)
	}
	var s apiSchema
	if err := h.get(ctx, "/subjects/"+url.PathEscape(subject)+"/versions/"+v, &s); err != nil {
		return nil, err
	}
	return h.parse(ctx, s)
}
