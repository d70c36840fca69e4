package securitytest

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testutil"
)

// kcat runs kcat (librdkafka) with args and input, failing the test on an
// error.
func kcat(t *testing.T, input string, args ...string) string {
	t.Helper()
	bin := testutil.RequireBinary(t, "kcat")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdin = strings.NewReader(input)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("kcat %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return out.String()
}

// TestKcatSASLSSL: kcat (librdkafka) produces and consumes in a group over
// SASL_SSL with SCRAM-SHA-512 and with PLAIN, trusting the test CA, and
// lists the broker at the SASL_SSL listener's address.
func TestKcatSASLSSL(t *testing.T) {
	testutil.Heavy(t, "kcat")
	testutil.RequireBinary(t, "kcat")
	s := startSecured(t)
	ctx := ctxFor(t, 60*time.Second)
	adm := kadm.NewClient(client(t, s.saslSSL, kgo.DialTLSConfig(s.trust(nil)), kgo.SASL(scramSHA512("alice", "alice-secret"))))
	for _, tc := range []struct{ mech, user, pass string }{
		{"SCRAM-SHA-512", "alice", "alice-secret"},
		{"PLAIN", "bob", "bob-secret"},
	} {
		t.Run(tc.mech, func(t *testing.T) {
			topic := "kcat-" + strings.ToLower(tc.mech)
			if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
				t.Fatal(err)
			}
			conf := []string{"-b", s.saslSSL,
				"-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=" + tc.mech,
				"-X", "sasl.username=" + tc.user, "-X", "sasl.password=" + tc.pass,
				"-X", "ssl.ca.location=" + s.ca.TrustPath}
			kcat(t, "one\ntwo\nthree\n", append(conf, "-P", "-t", topic)...)
			out := kcat(t, "", append(conf, "-G", "kcat-"+tc.user, "-X", "auto.offset.reset=earliest", "-e", "-q", "-f", "%s\n", topic)...)
			if out != "one\ntwo\nthree\n" {
				t.Fatalf("consumed %q", out)
			}
			list := kcat(t, "", append(conf, "-L", "-t", topic)...)
			if !strings.Contains(list, "at "+s.saslSSL) {
				t.Fatalf("kcat -L does not list the broker at the SASL_SSL listener %s:\n%s", s.saslSSL, list)
			}
		})
	}
	t.Run("wrong password", func(t *testing.T) {
		bin := testutil.RequireBinary(t, "kcat")
		cmd := exec.Command(bin, "-b", s.saslSSL, "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-512",
			"-X", "sasl.username=alice", "-X", "sasl.password=guess", "-X", "ssl.ca.location="+s.ca.TrustPath, "-L", "-m", "5")
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "Authentication failed") {
			t.Fatalf("kcat with a wrong password: %v\n%s", err, out)
		}
	})
}
