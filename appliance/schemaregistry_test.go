package appliance

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/consoledb"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/schemareg/serde"
)

func startApplianceIn(t *testing.T, dir string, settings ...string) *App {
	t.Helper()
	base := []string{
		"log.dirs=" + filepath.Join(dir, "kafka"),
		"console.data.dir=" + filepath.Join(dir, "console"),
		"console.listen=",
		"offsets.topic.num.partitions=1",
	}
	cfg, err := Load("", append(base, settings...))
	if err != nil {
		t.Fatal(err)
	}
	app, err := New(cfg, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := app.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return app
}

func httpDo(t *testing.T, method, url, user, pw, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	if user != "" {
		req.SetBasicAuth(user, pw)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

const testAvro = `{"schema":"{\"type\":\"record\",\"name\":\"Order\",\"fields\":[{\"name\":\"id\",\"type\":\"string\"}]}"}`

// The registry of `sluice serve`: schemas in a compacted one-partition
// _schemas topic of the broker, still there after a restart; the in-process
// decoder reads the same view.
func TestSchemaRegistryComponent(t *testing.T) {
	dir := t.TempDir()
	kafka, regAddr := testutil.FreeAddr(t), testutil.FreeAddr(t)
	settings := []string{"listeners=PLAINTEXT://" + kafka, "schema.registry.listen=" + regAddr}
	app := startApplianceIn(t, dir, settings...)
	url := "http://" + regAddr
	if st, body := httpDo(t, "GET", url+"/subjects", "", "", ""); st != 200 || body != "[]" {
		t.Fatalf("subjects: %d %s", st, body)
	}
	// no _schemas topic before the first write
	cl, err := kgo.NewClient(kgo.SeedBrokers(kafka))
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	if tds, _ := adm.ListTopics(ctx); tds.Has("_schemas") {
		t.Fatal("_schemas exists before any write")
	}
	if st, body := httpDo(t, "POST", url+"/subjects/orders-value/versions", "", "", testAvro); st != 200 || body != `{"id":1}` {
		t.Fatalf("register: %d %s", st, body)
	}
	tds, err := adm.ListTopics(ctx, "_schemas")
	if err != nil || len(tds["_schemas"].Partitions) != 1 {
		t.Fatalf("_schemas: %v %+v", err, tds)
	}
	rc, err := adm.DescribeTopicConfigs(ctx, "_schemas")
	if err != nil {
		t.Fatal(err)
	}
	if v, err := rc.On("_schemas", nil); err != nil || !strings.Contains(strings.Join(configValues(v.Configs, "cleanup.policy"), ","), "compact") {
		t.Fatalf("cleanup.policy of _schemas: %v %+v", err, v)
	}
	cl.Close()
	// the decoder of the same process
	dec := serde.NewDecoder(SchemaSource(app))
	b, _, err := dec.Encode(ctx, "orders-value", -1, []byte(`{"id":"o-1"}`), "")
	if err != nil {
		t.Fatal(err)
	}
	if d, err := dec.Decode(ctx, b); err != nil || string(d.JSON) != `{"id":"o-1"}` || d.Subject != "orders-value" || d.Version != 1 {
		t.Fatalf("decode: %v %+v", err, d)
	}
	// metrics
	if st, _ := httpDo(t, "GET", url+"/nope", "", "", ""); st != 404 {
		t.Fatalf("404: %d", st)
	}
	if err := app.Close(); err != nil {
		t.Fatal(err)
	}

	// after a restart the view is read back from the topic
	app = startApplianceIn(t, dir, settings...)
	defer app.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, body := httpDo(t, "GET", url+"/subjects/orders-value/versions/1", "", "", "")
		if st == 200 && strings.Contains(body, `"id":1`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after restart: %d %s", st, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st, body := httpDo(t, "POST", url+"/subjects/other/versions", "", "", `{"schema":"\"long\""}`); st != 200 || body != `{"id":2}` {
		t.Fatalf("register after restart: %d %s", st, body)
	}
}

func configValues(cs []kadm.Config, name string) []string {
	var out []string
	for _, c := range cs {
		if c.Key == name && c.Value != nil {
			out = append(out, *c.Value)
		}
	}
	return out
}

// schema.registry.auth=basic: the console's users, viewers read, operators
// also write.
func TestSchemaRegistryBasicAuth(t *testing.T) {
	consoledb.BcryptCost = 4
	dir := t.TempDir()
	ctx := context.Background()
	db, users, err := consoledb.OpenConsole(ctx, filepath.Join(dir, "console"))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []struct {
		name string
		role consoledb.Role
	}{{"vera", consoledb.RoleViewer}, {"otto", consoledb.RoleOperator}} {
		if _, err := users.CreateUser(ctx, u.name, u.role, "password-"+u.name); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	regAddr := testutil.FreeAddr(t)
	app := startApplianceIn(t, dir, "listeners=PLAINTEXT://"+testutil.FreeAddr(t), "schema.registry.listen="+regAddr, "schema.registry.auth=basic")
	defer app.Close()
	url := "http://" + regAddr
	if st, _ := httpDo(t, "GET", url+"/subjects", "", "", ""); st != 401 {
		t.Fatalf("no credentials: %d", st)
	}
	if st, _ := httpDo(t, "GET", url+"/subjects", "vera", "wrong-password", ""); st != 401 {
		t.Fatalf("wrong password: %d", st)
	}
	if st, body := httpDo(t, "GET", url+"/subjects", "vera", "password-vera", ""); st != 200 {
		t.Fatalf("viewer read: %d %s", st, body)
	}
	if st, body := httpDo(t, "POST", url+"/subjects/s/versions", "vera", "password-vera", testAvro); st != 403 || !strings.Contains(body, "40301") {
		t.Fatalf("viewer write: %d %s", st, body)
	}
	if st, body := httpDo(t, "POST", url+"/subjects/s/versions", "otto", "password-otto", testAvro); st != 200 {
		t.Fatalf("operator write: %d %s", st, body)
	}
	// a lookup is a read
	if st, body := httpDo(t, "POST", url+"/subjects/s", "vera", "password-vera", testAvro); st != 200 {
		t.Fatalf("viewer lookup: %d %s", st, body)
	}
}

// The default address taken by another program only costs the registry;
// an address set on purpose that cannot be bound fails the start.
func TestSchemaRegistryAddressInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg := DefaultConfig()
	cfg.SchemaRegistryListen = ln.Addr().String()
	a := &App{cfg: cfg, logger: slog.New(slog.DiscardHandler)}
	c := newSchemaRegistry(a)
	if err := c.Start(context.Background()); err != nil {
		t.Fatalf("default address in use: %v", err)
	}
	c.Close()
	cfg.Given["schema.registry.listen"] = cfg.SchemaRegistryListen
	c = newSchemaRegistry(a)
	if err := c.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "schema.registry.listen") {
		t.Fatalf("given address in use: %v", err)
	}
	if SchemaRegistry(a) != nil {
		t.Fatal("a registry that did not start is registered")
	}
}

// schema.registry.tls.cert/key: the registry serves HTTPS.
func TestSchemaRegistryTLS(t *testing.T) {
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	os.WriteFile(certFile, certPEM, 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)

	regAddr := testutil.FreeAddr(t)
	app := startApplianceIn(t, dir, "listeners=PLAINTEXT://"+testutil.FreeAddr(t), "schema.registry.listen="+regAddr,
		"schema.registry.tls.cert="+certFile, "schema.registry.tls.key="+keyFile)
	defer app.Close()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	cl := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := cl.Get("https://" + regAddr + "/schemas/types")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != `["JSON","PROTOBUF","AVRO"]` || resp.Header.Get("Content-Type") != "application/vnd.schemaregistry.v1+json" {
		t.Fatalf("https: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if resp, err := http.Get("http://" + regAddr + "/schemas/types"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("plain HTTP on the TLS listener: %d", resp.StatusCode)
		}
	}
	// a key without its certificate is refused at load
	if _, err := Load("", []string{"schema.registry.tls.key=" + keyFile}); err == nil || !strings.Contains(err.Error(), "schema.registry.tls.cert") {
		t.Fatalf("key alone: %v", err)
	}
	if _, err := Load("", []string{"schema.registry.auth=digest"}); err == nil || !strings.Contains(err.Error(), "schema.registry.auth") {
		t.Fatalf("bad auth: %v", err)
	}
}
