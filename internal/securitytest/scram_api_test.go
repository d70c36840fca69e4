package securitytest

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// TestUserScramCredentialAPIs: kadm creates, describes, rotates and deletes
// SCRAM users through AlterUserScramCredentials and
// DescribeUserScramCredentials; a created user logs in at once, a rotated
// password replaces the old one, a deleted user is refused; Kafka's errors
// for bad requests.
func TestUserScramCredentialAPIs(t *testing.T) {
	s := startSecured(t)
	ctx := ctxFor(t, 60*time.Second)
	tlsOpt := kgo.DialTLSConfig(s.trust(nil))
	adm := kadm.NewClient(client(t, s.saslSSL, tlsOpt, kgo.SASL(scramSHA512("alice", "alice-secret"))))
	login := func(user, pass string) error {
		cl := client(t, s.saslSSL, tlsOpt, kgo.SASL(scramSHA512(user, pass)))
		_, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		return err
	}

	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "dave", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "dave-1"},
		{User: "dave", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "dave-1"},
	})
	if err != nil || res.Error() != nil {
		t.Fatalf("create dave: %v %v", err, res.Error())
	}
	if err := login("dave", "dave-1"); err != nil {
		t.Fatalf("dave logs in: %v", err)
	}
	desc, err := adm.DescribeUserSCRAMs(ctx, "dave", "alice", "nobody")
	if err != nil {
		t.Fatal(err)
	}
	d := desc["dave"]
	if d.Err != nil || len(d.CredInfos) != 2 || d.CredInfos[0].Mechanism != kadm.ScramSha256 || d.CredInfos[1].Iterations != 8192 {
		t.Fatalf("dave described as %+v", d)
	}
	if !errors.Is(desc["nobody"].Err, kerr.ResourceNotFound) {
		t.Fatalf("nobody described as %+v", desc["nobody"])
	}
	all, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 || all["alice"].Err != nil || all["bob"].Err != nil {
		t.Fatalf("all users: %+v", all)
	}

	// Rotating the password: the old one stops working.
	if res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "dave", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "dave-2"}}); err != nil || res.Error() != nil {
		t.Fatalf("rotate: %v %v", err, res.Error())
	}
	if err := login("dave", "dave-1"); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("the old password after rotation: %v", err)
	}
	if err := login("dave", "dave-2"); err != nil {
		t.Fatalf("the new password: %v", err)
	}

	// Kafka's errors, sent raw (kadm checks some before sending); a user
	// with a bad change keeps its credentials.
	raw := client(t, s.saslSSL, tlsOpt, kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()))
	type del struct {
		user string
		mech int8
	}
	type ups struct {
		user  string
		mech  int8
		iters int32
	}
	for _, tc := range []struct {
		name   string
		dels   []del
		upsert []ups
		user   string
		want   *kerr.Error
	}{
		{"too few iterations", nil, []ups{{"erin", 2, 1000}}, "erin", kerr.UnacceptableCredential},
		{"too many iterations", nil, []ups{{"erin", 2, 20000}}, "erin", kerr.UnacceptableCredential},
		{"empty name", nil, []ups{{"", 2, 4096}}, "", kerr.UnacceptableCredential},
		{"unknown mechanism", nil, []ups{{"erin", 9, 4096}}, "erin", kerr.UnsupportedSaslMechanism},
		{"twice", []del{{"dave", 2}}, []ups{{"dave", 2, 4096}}, "dave", kerr.DuplicateResource},
		{"delete missing", []del{{"bob", 1}, {"bob", 2}}, nil, "bob", kerr.ResourceNotFound},
	} {
		req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
		for _, d := range tc.dels {
			rd := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
			rd.Name, rd.Mechanism = d.user, d.mech
			req.Deletions = append(req.Deletions, rd)
		}
		for _, u := range tc.upsert {
			ru := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
			ru.Name, ru.Mechanism, ru.Iterations, ru.Salt, ru.SaltedPassword = u.user, u.mech, u.iters, []byte("salt"), make([]byte, 64)
			req.Upsertions = append(req.Upsertions, ru)
		}
		resp, err := req.RequestWith(ctx, raw)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(resp.Results) != 1 || resp.Results[0].User != tc.user || resp.Results[0].ErrorCode != tc.want.Code {
			t.Errorf("%s: %+v, want %s for %q", tc.name, resp.Results, tc.want.Message, tc.user)
		}
	}
	if err := login("dave", "dave-2"); err != nil {
		t.Fatalf("dave after a refused change: %v", err)
	}
	if err := login("bob", "bob-secret"); err != nil {
		t.Fatalf("bob after a refused deletion: %v", err)
	}

	// Deleting every credential: the user is refused.
	if res, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "dave", Mechanism: kadm.ScramSha512}, {User: "dave", Mechanism: kadm.ScramSha256}}, nil); err != nil || res.Error() != nil {
		t.Fatalf("delete dave: %v %v", err, res.Error())
	}
	if err := login("dave", "dave-2"); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("a deleted user: %v", err)
	}
	desc, err = adm.DescribeUserSCRAMs(ctx, "dave")
	if err != nil || !errors.Is(desc["dave"].Err, kerr.ResourceNotFound) {
		t.Fatalf("dave after deletion: %v %+v", err, desc)
	}
}
