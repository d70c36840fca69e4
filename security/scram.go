package security

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
)

// ScramMechanism is one SCRAM mechanism Kafka knows: its SASL name, its
// hash, and the code DescribeUserScramCredentials and
// AlterUserScramCredentials use for it.
type ScramMechanism struct {
	Name string
	Code int8
	hash func() hash.Hash
}

// Kafka's SCRAM mechanisms (ScramMechanism.java).
var (
	ScramSHA256 = &ScramMechanism{Name: "SCRAM-SHA-256", Code: 1, hash: sha256.New}
	ScramSHA512 = &ScramMechanism{Name: "SCRAM-SHA-512", Code: 2, hash: sha512.New}
)

// ScramMechanisms lists the SCRAM mechanisms, strongest first (PLAIN tries
// a user's credentials in this order).
var ScramMechanisms = []*ScramMechanism{ScramSHA512, ScramSHA256}

// Kafka's bounds on a SCRAM credential's iterations (ScramMechanism.java):
// fewer than 4096 is refused at authentication and at creation, more than
// 16384 at creation.
const (
	MinScramIterations = 4096
	MaxScramIterations = 16384
)

// ScramMechanismNamed returns the SCRAM mechanism of a SASL name
// ("SCRAM-SHA-512").
func ScramMechanismNamed(name string) (*ScramMechanism, bool) {
	for _, m := range ScramMechanisms {
		if m.Name == name {
			return m, true
		}
	}
	return nil, false
}

// ScramMechanismCoded returns the SCRAM mechanism of a wire code (1, 2).
func ScramMechanismCoded(code int8) (*ScramMechanism, bool) {
	for _, m := range ScramMechanisms {
		if m.Code == code {
			return m, true
		}
	}
	return nil, false
}

// ScramCredential is what the broker keeps of a user's password for one
// mechanism (Kafka's ScramCredential): never the password, only the salt,
// the iteration count and the two keys derived from the salted password.
type ScramCredential struct {
	Mechanism  string // "SCRAM-SHA-256" or "SCRAM-SHA-512"
	Salt       []byte
	StoredKey  []byte // H(HMAC(SaltedPassword, "Client Key"))
	ServerKey  []byte // HMAC(SaltedPassword, "Server Key")
	Iterations int
}

// SaltedPassword is RFC 5802's Hi(password, salt, iterations): PBKDF2 with
// HMAC over the mechanism's hash, as long as one hash.
func (m *ScramMechanism) SaltedPassword(password string, salt []byte, iterations int) ([]byte, error) {
	if iterations < 1 {
		return nil, fmt.Errorf("scram: %d iterations", iterations)
	}
	return pbkdf2.Key(m.hash, password, salt, iterations, m.hash().Size())
}

func (m *ScramMechanism) hmac(key []byte, msg string) []byte {
	h := hmac.New(m.hash, key)
	h.Write([]byte(msg))
	return h.Sum(nil)
}

func (m *ScramMechanism) sum(b []byte) []byte {
	h := m.hash()
	h.Write(b)
	return h.Sum(nil)
}

// CredentialFromSalted derives the stored credential from a salted
// password, as the broker does for AlterUserScramCredentials (whose client
// sends the salted password, never the password).
func (m *ScramMechanism) CredentialFromSalted(salted, salt []byte, iterations int) ScramCredential {
	return ScramCredential{
		Mechanism:  m.Name,
		Salt:       append([]byte(nil), salt...),
		StoredKey:  m.sum(m.hmac(salted, "Client Key")),
		ServerKey:  m.hmac(salted, "Server Key"),
		Iterations: iterations,
	}
}

// NewCredential derives a credential from a password with a new random
// salt. iterations must be within [MinScramIterations, MaxScramIterations].
func (m *ScramMechanism) NewCredential(password string, iterations int) (ScramCredential, error) {
	if err := CheckScramIterations(iterations); err != nil {
		return ScramCredential{}, err
	}
	if password == "" {
		return ScramCredential{}, errors.New("scram: empty password")
	}
	salt := make([]byte, 32)
	rand.Read(salt)
	salted, err := m.SaltedPassword(password, salt, iterations)
	if err != nil {
		return ScramCredential{}, err
	}
	return m.CredentialFromSalted(salted, salt, iterations), nil
}

// CheckScramIterations applies Kafka's bounds to a new credential.
func CheckScramIterations(iterations int) error {
	if iterations < MinScramIterations || iterations > MaxScramIterations {
		return fmt.Errorf("iterations %d outside [%d, %d]", iterations, MinScramIterations, MaxScramIterations)
	}
	return nil
}

// VerifyPassword reports whether password is the one the credential was
// made from (PLAIN against a SCRAM credential): Hi with the stored salt and
// iterations, then StoredKey compared in constant time.
func (c ScramCredential) VerifyPassword(password string) bool {
	m, ok := ScramMechanismNamed(c.Mechanism)
	if !ok || c.Iterations < MinScramIterations {
		return false
	}
	salted, err := m.SaltedPassword(password, c.Salt, c.Iterations)
	if err != nil {
		return false
	}
	got := m.sum(m.hmac(salted, "Client Key"))
	return subtle.ConstantTimeCompare(got, c.StoredKey) == 1
}

// String is Kafka's text form of a credential, the value of the mechanism's
// key in /config/users/<name>:
// salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n> (standard
// base64 with padding, ScramCredentialUtils.java).
func (c ScramCredential) String() string {
	enc := base64.StdEncoding.EncodeToString
	return "salt=" + enc(c.Salt) + ",stored_key=" + enc(c.StoredKey) + ",server_key=" + enc(c.ServerKey) +
		",iterations=" + strconv.Itoa(c.Iterations)
}

// ParseScramCredential reads Kafka's text form of a mechanism's
// credential. Exactly the four fields, keys of the mechanism's hash size.
func ParseScramCredential(mechanism, s string) (ScramCredential, error) {
	m, ok := ScramMechanismNamed(mechanism)
	if !ok {
		return ScramCredential{}, fmt.Errorf("scram: unknown mechanism %q", mechanism)
	}
	c := ScramCredential{Mechanism: m.Name}
	seen := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(f), "=")
		if !ok || seen[k] {
			return ScramCredential{}, fmt.Errorf("scram: bad credential field %q", f)
		}
		seen[k] = true
		var err error
		switch k {
		case "salt":
			c.Salt, err = base64.StdEncoding.DecodeString(v)
		case "stored_key":
			c.StoredKey, err = base64.StdEncoding.DecodeString(v)
		case "server_key":
			c.ServerKey, err = base64.StdEncoding.DecodeString(v)
		case "iterations":
			c.Iterations, err = strconv.Atoi(v)
		default:
			err = errors.New("unknown field")
		}
		if err != nil {
			return ScramCredential{}, fmt.Errorf("scram: credential field %s: %v", k, err)
		}
	}
	size := m.hash().Size()
	switch {
	case len(seen) != 4:
		return ScramCredential{}, errors.New("scram: credential needs salt, stored_key, server_key and iterations")
	case len(c.Salt) == 0:
		return ScramCredential{}, errors.New("scram: empty salt")
	case len(c.StoredKey) != size || len(c.ServerKey) != size:
		return ScramCredential{}, fmt.Errorf("scram: %s keys must be %d bytes", m.Name, size)
	case c.Iterations < 1:
		return ScramCredential{}, fmt.Errorf("scram: %d iterations", c.Iterations)
	}
	return c, nil
}

// CredentialLookup finds a user's stored credential for a SCRAM mechanism.
// It is called on every authentication and must answer from memory.
type CredentialLookup interface {
	ScramCredential(user, mechanism string) (ScramCredential, bool)
}

// ErrAuthentication marks a failed authentication: wrong or unknown
// credentials, or a malformed exchange. Its message is for the log; the
// client is told only AuthFailedMessage (Kafka's generic text), so that
// an unknown user and a wrong password look alike.
var ErrAuthentication = errors.New("authentication failed")

func authErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrAuthentication, fmt.Sprintf(format, args...))
}

// AuthFailedMessage is the error message a client gets for a failed SASL
// authentication (Kafka's SaslServerAuthenticator).
func AuthFailedMessage(mechanism string) string {
	return "Authentication failed during authentication due to invalid credentials with SASL mechanism " + mechanism
}

// SASLServer is the server's side of one SASL exchange: Next takes each
// client message and returns the answer; done is true after the last
// (successful) step. An error ends the exchange (ErrAuthentication).
type SASLServer interface {
	Next(msg []byte) (resp []byte, done bool, err error)
	// User is the authenticated user, once done.
	User() string
}

// NewSASLServer starts an exchange of a mechanism Sluice serves: PLAIN,
// SCRAM-SHA-256 or SCRAM-SHA-512.
func NewSASLServer(mechanism string, creds CredentialLookup) (SASLServer, error) {
	if mechanism == MechanismPlain {
		return &plainServer{creds: creds}, nil
	}
	if m, ok := ScramMechanismNamed(mechanism); ok {
		return NewScramServer(m, creds), nil
	}
	return nil, fmt.Errorf("unsupported SASL mechanism %q", mechanism)
}

// ScramServer is the server's side of one SCRAM exchange (RFC 5802): the
// client-first message is answered with the salt, the iterations and the
// combined nonce; the client-final message's proof is checked against the
// stored key and answered with the server's signature.
//
// An unknown user is not told apart from a wrong password: the exchange
// goes on with a made-up credential and fails at the proof.
type ScramServer struct {
	mech  *ScramMechanism
	creds CredentialLookup

	step            int
	user            string
	gs2Header       string
	cred            ScramCredential
	known           bool
	clientFirstBare string
	serverFirst     string
	nonce           string // the client's nonce and the server's
	cnonce          string // the client's
}

// NewScramServer starts a SCRAM exchange.
func NewScramServer(m *ScramMechanism, creds CredentialLookup) *ScramServer {
	return &ScramServer{mech: m, creds: creds}
}

// User implements SASLServer.
func (s *ScramServer) User() string {
	if s.step < 2 {
		return ""
	}
	return s.user
}

// Next implements SASLServer.
func (s *ScramServer) Next(msg []byte) ([]byte, bool, error) {
	switch s.step {
	case 0:
		out, err := s.clientFirst(string(msg))
		if err != nil {
			s.step = -1
			return nil, false, err
		}
		s.step = 1
		return out, false, nil
	case 1:
		out, err := s.clientFinal(string(msg))
		if err != nil {
			s.step = -1
			return nil, false, err
		}
		s.step = 2
		return out, true, nil
	}
	return nil, false, authErr("SCRAM exchange is over")
}

// unknownUserSecret keys the made-up salts of unknown users, so that the
// same unknown name gets the same salt for the life of the process.
var unknownUserSecret = func() []byte {
	b := make([]byte, 32)
	rand.Read(b)
	return b
}()

func (s *ScramServer) clientFirst(msg string) ([]byte, error) {
	// gs2-header: "n," or "y," (no channel binding), then the authzid.
	var flag string
	switch {
	case strings.HasPrefix(msg, "n,"), strings.HasPrefix(msg, "y,"):
		flag = msg[:2]
	default:
		return nil, authErr("SCRAM client-first message: unsupported channel binding flag")
	}
	rest := msg[2:]
	authzid, bare, ok := strings.Cut(rest, ",")
	if !ok {
		return nil, authErr("SCRAM client-first message: malformed")
	}
	s.gs2Header = flag + authzid + ","
	s.clientFirstBare = bare
	fields := strings.Split(bare, ",")
	if len(fields) < 2 || !strings.HasPrefix(fields[0], "n=") || !strings.HasPrefix(fields[1], "r=") {
		return nil, authErr("SCRAM client-first message: malformed")
	}
	user, err := unescapeSaslName(fields[0][2:])
	if err != nil || user == "" {
		return nil, authErr("SCRAM client-first message: bad user name")
	}
	if authzid != "" {
		z, ok := strings.CutPrefix(authzid, "a=")
		if !ok {
			return nil, authErr("SCRAM client-first message: bad authzid")
		}
		if z, err = unescapeSaslName(z); err != nil || z != user {
			return nil, authErr("SCRAM authzid %q is not the user name", z)
		}
	}
	cnonce := fields[1][2:]
	if cnonce == "" || !printableNonce(cnonce) {
		return nil, authErr("SCRAM client-first message: bad nonce")
	}
	for _, ext := range fields[2:] {
		if ext == "tokenauth=true" {
			return nil, authErr("SCRAM delegation-token authentication is not supported")
		}
	}
	s.user = user
	s.cred, s.known = s.creds.ScramCredential(user, s.mech.Name)
	if s.known && s.cred.Iterations < MinScramIterations {
		s.known = false // Kafka refuses a credential below the minimum
	}
	if !s.known {
		h := hmac.New(sha256.New, unknownUserSecret)
		h.Write([]byte(s.mech.Name + "\x00" + user))
		size := s.mech.hash().Size()
		s.cred = ScramCredential{Mechanism: s.mech.Name, Salt: h.Sum(nil), Iterations: MinScramIterations,
			StoredKey: make([]byte, size), ServerKey: make([]byte, size)}
	}
	snonce := make([]byte, 18)
	rand.Read(snonce)
	s.cnonce = cnonce
	s.nonce = cnonce + base64.RawURLEncoding.EncodeToString(snonce)
	s.serverFirst = "r=" + s.nonce + ",s=" + base64.StdEncoding.EncodeToString(s.cred.Salt) + ",i=" + strconv.Itoa(s.cred.Iterations)
	return []byte(s.serverFirst), nil
}

func (s *ScramServer) clientFinal(msg string) ([]byte, error) {
	i := strings.LastIndex(msg, ",p=")
	if i < 0 {
		return nil, authErr("SCRAM client-final message: no proof")
	}
	withoutProof, proofB64 := msg[:i], msg[i+3:]
	fields := strings.Split(withoutProof, ",")
	if len(fields) < 2 || !strings.HasPrefix(fields[0], "c=") || !strings.HasPrefix(fields[1], "r=") {
		return nil, authErr("SCRAM client-final message: malformed")
	}
	cb, err := base64.StdEncoding.DecodeString(fields[0][2:])
	if err != nil || string(cb) != s.gs2Header {
		return nil, authErr("SCRAM client-final message: channel binding does not match the client-first message")
	}
	// librdkafka as Debian ships it (2.0.2: kcat, confluent-kafka-python)
	// sends its own nonce twice, before the whole nonce; Kafka up to 3.8 did not check the nonce at all. Both forms are
	// accepted; the proof covers the message either way.
	if n := fields[1][2:]; n != s.nonce && n != s.cnonce+s.nonce {
		return nil, authErr("SCRAM client-final message: nonce does not match")
	}
	proof, err := base64.StdEncoding.DecodeString(proofB64)
	if err != nil || len(proof) != s.mech.hash().Size() {
		return nil, authErr("SCRAM client-final message: bad proof")
	}
	authMessage := s.clientFirstBare + "," + s.serverFirst + "," + withoutProof
	sig := s.mech.hmac(s.cred.StoredKey, authMessage)
	clientKey := make([]byte, len(proof))
	for j := range proof {
		clientKey[j] = proof[j] ^ sig[j]
	}
	if subtle.ConstantTimeCompare(s.mech.sum(clientKey), s.cred.StoredKey) != 1 || !s.known {
		return nil, authErr("invalid credentials for user %q", s.user)
	}
	return []byte("v=" + base64.StdEncoding.EncodeToString(s.mech.hmac(s.cred.ServerKey, authMessage))), nil
}

func printableNonce(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e || c == ',' {
			return false
		}
	}
	return true
}

// unescapeSaslName undoes RFC 5802's saslname escapes (=2C, =3D).
func unescapeSaslName(s string) (string, error) {
	if !strings.Contains(s, "=") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", errors.New("bad escape in saslname")
		}
		i += 2
	}
	return b.String(), nil
}
