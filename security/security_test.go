package security

import (
	"context"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluice-io/sluice/internal/testutil"
)

type memCreds map[string]ScramCredential // user + "/" + mechanism

func (m memCreds) ScramCredential(user, mech string) (ScramCredential, bool) {
	c, ok := m[user+"/"+mech]
	return c, ok
}

func (m memCreds) add(t *testing.T, user, password string, mech *ScramMechanism, iterations int) {
	t.Helper()
	c, err := mech.NewCredential(password, iterations)
	if err != nil {
		t.Fatal(err)
	}
	m[user+"/"+mech.Name] = c
}

// exchange runs a client mechanism against a server until done.
func exchange(t *testing.T, client sasl.Mechanism, srv SASLServer) error {
	t.Helper()
	sess, msg, err := client.Authenticate(context.Background(), "broker:9092")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		resp, done, err := srv.Next(msg)
		if err != nil {
			return err
		}
		cdone, next, err := sess.Challenge(resp)
		if err != nil {
			return err
		}
		if done {
			if !cdone {
				t.Fatal("server done before the client")
			}
			return nil
		}
		msg = next
	}
	t.Fatal("exchange did not end")
	return nil
}

func TestScramWithFranzClient(t *testing.T) {
	creds := memCreds{}
	creds.add(t, "alice", "s3cret", ScramSHA512, 8192)
	creds.add(t, "bob", "hunter2", ScramSHA256, 4096)
	for _, tc := range []struct {
		name   string
		mech   *ScramMechanism
		client sasl.Mechanism
		ok     bool
	}{
		{"sha512 ok", ScramSHA512, scram.Auth{User: "alice", Pass: "s3cret"}.AsSha512Mechanism(), true},
		{"sha256 ok", ScramSHA256, scram.Auth{User: "bob", Pass: "hunter2"}.AsSha256Mechanism(), true},
		{"wrong password", ScramSHA512, scram.Auth{User: "alice", Pass: "nope"}.AsSha512Mechanism(), false},
		{"unknown user", ScramSHA512, scram.Auth{User: "mallory", Pass: "x"}.AsSha512Mechanism(), false},
		{"wrong mechanism", ScramSHA256, scram.Auth{User: "alice", Pass: "s3cret"}.AsSha256Mechanism(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := NewScramServer(tc.mech, creds)
			err := exchange(t, tc.client, srv)
			if tc.ok != (err == nil) {
				t.Fatalf("err = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrAuthentication) {
				t.Fatalf("error %v is not ErrAuthentication", err)
			}
			if tc.ok && srv.User() == "" {
				t.Fatal("no user after success")
			}
			if !tc.ok && srv.User() != "" {
				t.Fatalf("user %q after failure", srv.User())
			}
		})
	}
}

// An unknown user gets a salt and an iteration count like a known one, and
// the same salt each time: the first answer does not tell them apart.
func TestScramUnknownUserLooksKnown(t *testing.T) {
	creds := memCreds{}
	first := func() string {
		srv := NewScramServer(ScramSHA256, creds)
		out, _, err := srv.Next([]byte("n,,n=ghost,r=abc"))
		if err != nil {
			t.Fatal(err)
		}
		s := string(out)
		return s[strings.Index(s, ",s="):]
	}
	a, b := first(), first()
	if a != b || !strings.HasSuffix(a, ",i=4096") {
		t.Fatalf("unknown user's server-first tails %q and %q", a, b)
	}
}

// RFC 7677's example: the credential derived from "pencil" with its salt
// verifies the example's client proof and yields its server signature.
func TestScramRFC7677Vector(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	salted, err := ScramSHA256.SaltedPassword("pencil", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	c := ScramSHA256.CredentialFromSalted(salted, salt, 4096)
	srv := NewScramServer(ScramSHA256, memCreds{"user/SCRAM-SHA-256": c})
	if _, _, err := srv.Next([]byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO")); err != nil {
		t.Fatal(err)
	}
	// Replace the random server nonce by the RFC's to reproduce its messages.
	srv.nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
	srv.serverFirst = "r=" + srv.nonce + ",s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
	out, done, err := srv.Next([]byte("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
	if err != nil || !done {
		t.Fatalf("final: %v %v", err, done)
	}
	if string(out) != "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=" {
		t.Fatalf("server-final %q", out)
	}
	if !c.VerifyPassword("pencil") || c.VerifyPassword("pencil ") {
		t.Fatal("VerifyPassword")
	}
}

func TestScramMalformed(t *testing.T) {
	creds := memCreds{}
	creds.add(t, "alice", "pw", ScramSHA256, 4096)
	for _, first := range []string{"", "p=tls-unique,,n=alice,r=x", "n,,r=x", "n,,n=alice", "n,a=bob,n=alice,r=x", "n,,n=al=ZZice,r=x", "n,,n=alice,r=x,tokenauth=true", "n,,n=,r=x"} {
		srv := NewScramServer(ScramSHA256, creds)
		if _, _, err := srv.Next([]byte(first)); !errors.Is(err, ErrAuthentication) {
			t.Errorf("client-first %q: err %v", first, err)
		}
	}
	srv := NewScramServer(ScramSHA256, creds)
	if _, _, err := srv.Next([]byte("n,,n=alice,r=abc")); err != nil {
		t.Fatal(err)
	}
	// Wrong nonce.
	if _, _, err := srv.Next([]byte("c=biws,r=abcX,p=" + base64.StdEncoding.EncodeToString(make([]byte, 32)))); !errors.Is(err, ErrAuthentication) {
		t.Fatalf("wrong nonce: %v", err)
	}
	if _, _, err := srv.Next([]byte("anything")); err == nil {
		t.Fatal("a failed exchange went on")
	}
	// A stored credential below 4096 iterations is refused, as Kafka does.
	weak := ScramSHA256.CredentialFromSalted(make([]byte, 32), []byte("salt"), 1024)
	srv = NewScramServer(ScramSHA256, memCreds{"w/SCRAM-SHA-256": weak})
	out, _, _ := srv.Next([]byte("n,,n=w,r=abc"))
	if !strings.HasSuffix(string(out), ",i=4096") {
		t.Fatalf("weak credential answered %q", out)
	}
}

func TestPlainAgainstScram(t *testing.T) {
	creds := memCreds{}
	creds.add(t, "alice", "s3cret", ScramSHA512, 4096)
	creds.add(t, "bob", "pw256", ScramSHA256, 4096)
	ok := func(msg string) bool {
		srv, _ := NewSASLServer(MechanismPlain, creds)
		_, done, err := srv.Next([]byte(msg))
		return err == nil && done && srv.User() != ""
	}
	for msg, want := range map[string]bool{
		"\x00alice\x00s3cret":      true,
		"alice\x00alice\x00s3cret": true, // kafka-python
		"\x00bob\x00pw256":         true,
		"\x00alice\x00wrong":       false,
		"bob\x00alice\x00s3cret":   false, // another authzid
		"\x00nobody\x00x":          false,
		"\x00alice\x00":            false,
		"alice\x00s3cret":          false,
		"\x00alice\x00s3cret\x00":  false,
	} {
		if got := ok(msg); got != want {
			t.Errorf("%q: ok=%v, want %v", msg, got, want)
		}
	}
	// franz-go's PLAIN client.
	srv, _ := NewSASLServer(MechanismPlain, creds)
	if err := exchange(t, plain.Auth{User: "alice", Pass: "s3cret"}.AsMechanism(), srv); err != nil {
		t.Fatal(err)
	}
}

func TestCredentialText(t *testing.T) {
	c, err := ScramSHA512.NewCredential("pw", 8192)
	if err != nil {
		t.Fatal(err)
	}
	s := c.String()
	if !strings.HasPrefix(s, "salt=") || !strings.HasSuffix(s, ",iterations=8192") || !strings.Contains(s, ",stored_key=") {
		t.Fatalf("%q", s)
	}
	back, err := ParseScramCredential("SCRAM-SHA-512", s)
	if err != nil {
		t.Fatal(err)
	}
	if back.String() != s || !back.VerifyPassword("pw") {
		t.Fatal("round trip")
	}
	// Kafka's own text (kafka-configs --add-config 'SCRAM-SHA-256=[password=alice-secret]').
	kafka := "salt=MWx2NHBkbnc0ZndxN25vdGN4bTB5eTFrN3E=,stored_key=GGNGBAOB5aCy81mewqRdLCskCk4Tw3ZuHeWTJjJaaBM=,server_key=eD0e3Tu4eNWVm0I+5e89SqkRUNCYjRP7LQbpyGQAdoI=,iterations=4096"
	if _, err := ParseScramCredential("SCRAM-SHA-256", kafka); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "salt=AA==", kafka + ",extra=1", strings.Replace(kafka, "iterations=4096", "iterations=x", 1), strings.Replace(kafka, "stored_key=GG", "stored_key=", 1)} {
		if _, err := ParseScramCredential("SCRAM-SHA-256", bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	if _, err := ScramSHA256.NewCredential("pw", 1000); err == nil {
		t.Fatal("1000 iterations accepted")
	}
	if _, err := ScramSHA256.NewCredential("pw", 20000); err == nil {
		t.Fatal("20000 iterations accepted")
	}
}

func TestSanitizeUser(t *testing.T) {
	for in, want := range map[string]string{
		"alice":     "alice",
		"a.b-c_d":   "a.b-c_d",
		"user@corp": "user%40corp",
		"x y":       "x%20y",
		"a*b+c~":    "a%2Ab%2Bc%7E",
		"CN=x,OU=y": "CN%3Dx%2COU%3Dy",
		"ü":         "%C3%BC",
	} {
		got := SanitizeUser(in)
		if got != want {
			t.Errorf("SanitizeUser(%q) = %q, want %q", in, got, want)
		}
		back, err := DesanitizeUser(got)
		if err != nil || back != in {
			t.Errorf("DesanitizeUser(%q) = %q, %v", got, back, err)
		}
	}
	if _, err := DesanitizeUser("bad%2"); err == nil {
		t.Fatal("truncated escape accepted")
	}
}

func TestPrincipalMapping(t *testing.T) {
	dn := "CN=writeuser,OU=Unknown,O=Unknown,L=Unknown,ST=Unknown,C=Unknown"
	for rules, want := range map[string]string{
		"":        dn,
		"DEFAULT": dn,
		"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,DEFAULT": "writeuser@unknown",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT":                             dn,
		"RULE:^CN=(.*?),OU=(.*?).*$/$1/U":                                           "WRITEUSER",
		"RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L, DEFAULT":                         "writeuser",
		"RULE:^CN=([^,]*),.*$/user\\/$1/":                                           "user/writeuser",
	} {
		m, err := ParsePrincipalMappingRules(rules)
		if err != nil {
			t.Fatalf("%q: %v", rules, err)
		}
		got, err := m.Map(dn)
		if err != nil || got != want {
			t.Errorf("%q: %q, %v; want %q", rules, got, err, want)
		}
	}
	m, _ := ParsePrincipalMappingRules("RULE:^CN=admin,.*$/admin/")
	if _, err := m.Map(dn); err == nil {
		t.Fatal("no rule matched, yet mapped")
	}
	for _, bad := range []string{"RULE:abc", "NOPE", "RULE:(/x/", "DEFAULT;RULE:a/b/"} {
		if _, err := ParsePrincipalMappingRules(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestSubjectDN(t *testing.T) {
	ca := testutil.NewCA(t, "")
	c := ca.Issue(t, "dn", testutil.CertOptions{Subject: pkix.Name{
		CommonName: "alice", OrganizationalUnit: []string{"Eng"}, Organization: []string{"Acme, Inc"},
		Country:    []string{"DE"},
		ExtraNames: []pkix.AttributeTypeAndValue{{Type: asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 25}, Value: "example"}},
	}})
	dn, err := SubjectDN(c.Leaf)
	if err != nil {
		t.Fatal(err)
	}
	// Java's X500Principal.getName(): the last RDN first.
	if want := `DC=example,CN=alice,OU=Eng,O=Acme\, Inc,C=DE`; dn != want {
		t.Fatalf("DN %q, want %q", dn, want)
	}
	p, err := DefaultPrincipalMapper.CertificatePrincipal(c.Leaf)
	if err != nil || p.String() != "User:"+dn {
		t.Fatalf("%v %v", p, err)
	}
}

func TestServerTLSReload(t *testing.T) {
	ca := testutil.NewCA(t, "")
	first := ca.Server(t, "one")
	dir := t.TempDir()
	ks := filepath.Join(dir, "broker.pem")
	if err := os.WriteFile(ks, append(first.KeyPEM, first.CertPEM...), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := NewServerTLS(TLSSettings{KeystoreType: "PEM", KeystoreLocation: ks})
	if err != nil {
		t.Fatal(err)
	}
	var reloads []error
	st.OnReload = func(err error) { reloads = append(reloads, err) }
	if got := st.Certificate(); got.SerialNumber.Cmp(first.Leaf.SerialNumber) != 0 {
		t.Fatal("not the first certificate")
	}
	second := ca.Server(t, "two")
	if err := os.WriteFile(ks, append(second.KeyPEM, second.CertPEM...), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(ks, time.Now().Add(time.Minute), time.Now().Add(time.Minute))
	st.lastCheck.Store(0) // the next handshake checks
	if got := st.Certificate(); got.SerialNumber.Cmp(second.Leaf.SerialNumber) != 0 {
		t.Fatal("renewed certificate not picked up")
	}
	// A broken file keeps the last good certificate.
	os.WriteFile(ks, []byte("garbage"), 0o600)
	st.lastCheck.Store(0)
	if got := st.Certificate(); got.SerialNumber.Cmp(second.Leaf.SerialNumber) != 0 {
		t.Fatal("a broken file replaced the certificate")
	}
	if len(reloads) != 2 || reloads[0] != nil || reloads[1] == nil {
		t.Fatalf("reloads %v", reloads)
	}
}

func TestTLSSettingsErrors(t *testing.T) {
	ca := testutil.NewCA(t, "")
	c := ca.Server(t, "s")
	for name, s := range map[string]TLSSettings{
		"no keystore":     {},
		"jks":             {KeystoreType: "JKS", KeystoreLocation: c.KeystorePath},
		"missing file":    {KeystoreLocation: "/nonexistent.pem"},
		"both":            {KeystoreLocation: c.KeystorePath, KeystoreKey: string(c.KeyPEM)},
		"bad protocol":    {KeystoreLocation: c.KeystorePath, EnabledProtocols: []string{"TLSv1"}},
		"bad suite":       {KeystoreLocation: c.KeystorePath, CipherSuites: []string{"TLS_NOPE"}},
		"required no CA":  {KeystoreLocation: c.KeystorePath, ClientAuth: "required"},
		"bad client auth": {KeystoreLocation: c.KeystorePath, ClientAuth: "maybe"},
		"key password":    {KeystoreLocation: c.KeystorePath, KeyPassword: "x"},
	} {
		if _, err := NewServerTLS(s); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := NewServerTLS(TLSSettings{KeystoreKey: string(c.KeyPEM), KeystoreCertificateChain: string(c.CertPEM),
		TruststoreCertificates: string(ca.CertPEM), ClientAuth: "required",
		EnabledProtocols: []string{"TLSv1.3"}, CipherSuites: []string{"TLS_AES_128_GCM_SHA256"}}); err != nil {
		t.Fatal(err)
	}
}

func TestJAAS(t *testing.T) {
	j, err := ParseJAAS(`org.apache.kafka.common.security.scram.ScramLoginModule required
		// the broker's own
		username="admin" /* c */ password="a\"b;c";`)
	if err != nil {
		t.Fatal(err)
	}
	if j.Module != ScramLoginModule || j.Flag != "required" || j.Options["username"] != "admin" || j.Options["password"] != `a"b;c` {
		t.Fatalf("%+v", j)
	}
	for _, bad := range []string{"", "x required", `x maybe a="b";`, `x required a="b;`, `x required a b;`} {
		if _, err := ParseJAAS(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestResolveSecrets(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "creds.properties"), []byte("# c\nuser=alice\npassword = s3cret\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "pw"), []byte("from-file\n"), 0o600)
	t.Setenv("SLUICE_TEST_PW", "from-env")
	for in, want := range map[string]string{
		"plain":                             "plain",
		"${env:SLUICE_TEST_PW}":             "from-env",
		`password="${env:SLUICE_TEST_PW}";`: `password="from-env";`,
		"${file:" + dir + "/creds.properties:password}": "s3cret",
		"${directory:" + dir + ":pw}":                   "from-file",
		"${other:x}":                                    "${other:x}",
	} {
		got, err := ResolveSecrets(in)
		if err != nil || got != want {
			t.Errorf("%q: %q, %v", in, got, err)
		}
	}
	for _, bad := range []string{"${env:SLUICE_TEST_UNSET_VAR}", "${file:" + dir + "/creds.properties:nokey}", "${file:nofile}"} {
		if _, err := ResolveSecrets(bad); err == nil {
			t.Errorf("%q resolved", bad)
		}
	}
}

func TestThrottle(t *testing.T) {
	now := time.Unix(1000, 0)
	th := NewThrottle(100 * time.Millisecond)
	th.now = func() time.Time { return now }
	ip := netip.MustParseAddr("10.0.0.1")
	other := netip.MustParseAddr("10.0.0.2")
	if w, ok := th.Admit(ip); w != 0 || !ok {
		t.Fatal("a fresh address waits")
	}
	if d := th.Failed(ip); d != 100*time.Millisecond {
		t.Fatalf("first penalty %v", d)
	}
	th.Failed(ip)
	th.Failed(ip) // penalty 400ms, next slot now+400ms
	// Parallel attempts queue one penalty apart.
	var waits []time.Duration
	for range 3 {
		w, ok := th.Admit(ip)
		if !ok {
			t.Fatal("refused")
		}
		waits = append(waits, w)
	}
	if waits[0] != 400*time.Millisecond || waits[1] != 800*time.Millisecond || waits[2] != 1200*time.Millisecond {
		t.Fatalf("waits %v", waits)
	}
	if w, _ := th.Admit(other); w != 0 {
		t.Fatal("another address is slowed")
	}
	for range 20 {
		th.Failed(ip)
	}
	if d := th.penaltyFor(30); d != th.Max {
		t.Fatalf("penalty not capped: %v", d)
	}
	for {
		if _, ok := th.Admit(ip); !ok {
			break
		}
	}
	now = now.Add(11 * time.Minute)
	if w, ok := th.Admit(ip); w != 0 || !ok {
		t.Fatal("failures not forgotten")
	}
	th.Failed(ip)
	th.Succeeded(ip)
	if w, _ := th.Admit(ip); w != 0 {
		t.Fatal("success did not reset")
	}
}

// librdkafka 2.0 repeats its own nonce before the whole nonce in
// the client-final message; the exchange still completes (its proof covers
// that message), while a nonce that is neither form is refused.
func TestScramLibrdkafkaDoubledNonce(t *testing.T) {
	creds := memCreds{}
	creds.add(t, "alice", "pw", ScramSHA512, 4096)
	for _, tc := range []struct {
		name   string
		nonce  func(cnonce, full string) string
		wantOK bool
	}{
		{"RFC", func(_, full string) string { return full }, true},
		{"librdkafka 2.0", func(c, full string) string { return c + full }, true},
		{"other", func(c, full string) string { return full + "x" }, false},
	} {
		srv := NewScramServer(ScramSHA512, creds)
		cnonce := "cl13nt"
		bare := "n=alice,r=" + cnonce
		first, _, err := srv.Next([]byte("n,," + bare))
		if err != nil {
			t.Fatal(err)
		}
		var full, saltB64 string
		var iters int
		for _, f := range strings.Split(string(first), ",") {
			switch {
			case strings.HasPrefix(f, "r="):
				full = f[2:]
			case strings.HasPrefix(f, "s="):
				saltB64 = f[2:]
			case strings.HasPrefix(f, "i="):
				fmt.Sscan(f[2:], &iters)
			}
		}
		salt, _ := base64.StdEncoding.DecodeString(saltB64)
		salted, _ := ScramSHA512.SaltedPassword("pw", salt, iters)
		clientKey := ScramSHA512.hmac(salted, "Client Key")
		stored := ScramSHA512.sum(clientKey)
		without := "c=biws,r=" + tc.nonce(cnonce, full)
		sig := ScramSHA512.hmac(stored, bare+","+string(first)+","+without)
		proof := make([]byte, len(clientKey))
		for i := range proof {
			proof[i] = clientKey[i] ^ sig[i]
		}
		_, done, err := srv.Next([]byte(without + ",p=" + base64.StdEncoding.EncodeToString(proof)))
		if ok := err == nil && done; ok != tc.wantOK {
			t.Errorf("%s nonce: done=%v err=%v, want ok=%v", tc.name, done, err, tc.wantOK)
		}
	}
}
