package web

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestBrokerPage: /brokers/N shows the broker's log dirs, the partitions it
// leads with their sizes, and its configs with their sources, to a viewer;
// the brokers list links to it; an unknown or malformed id is a 404.
func TestBrokerPage(t *testing.T) {
	ts := newTestServer(t)
	createTopic(t, ts, "orders", 2)
	viewer := ts.signedIn(t, "vic", RoleViewer)

	r := viewer.Get("/brokers")
	expectStatus(t, r, http.StatusOK)
	expectContains(t, r, `href="/brokers/0"`)

	r = viewer.Get("/brokers/0")
	expectStatus(t, r, http.StatusOK)
	for _, want := range []string{"Broker 0", "Log directories", "Partitions led", `href="/topics/orders"`, "Partitions followed",
		"This broker follows no partition.", "Configs", "broker.id", "broker config file"} {
		expectContains(t, r, want)
	}

	viewer.Accept = "application/json"
	r = viewer.Get("/brokers/0")
	expectStatus(t, r, http.StatusOK)
	body := []byte(r.Text)
	var v struct {
		ID  int32 `json:"id"`
		Led []struct {
			Topic     string `json:"topic"`
			Partition int32  `json:"partition"`
			InSync    bool   `json:"in_sync"`
		} `json:"led"`
		Followed []any `json:"followed"`
		Configs  []struct {
			Name   string `json:"name"`
			Source string `json:"source"`
		} `json:"configs"`
		ConfigsError string `json:"configs_error"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if v.ID != 0 || len(v.Led) != 2 || v.Led[0].Topic != "orders" || v.Led[1].Partition != 1 || !v.Led[0].InSync || len(v.Followed) != 0 {
		t.Errorf("broker 0 as JSON: %s", body)
	}
	sources := map[string]string{}
	for _, c := range v.Configs {
		sources[c.Name] = c.Source
	}
	if sources["broker.id"] != "broker config file" || sources["compression.type"] != "default" {
		t.Errorf("configs and their sources: %v (error %q)", sources, v.ConfigsError)
	}
	viewer.Accept = ""

	for _, path := range []string{"/brokers/7", "/brokers/x", "/brokers/-1"} {
		r := viewer.Get(path)
		expectStatus(t, r, http.StatusNotFound)
		if !strings.Contains(r.Text, "brokers page") {
			t.Errorf("GET %s: the 404 does not point to the brokers page", path)
		}
	}
}
