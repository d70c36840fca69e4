package security

import (
	"bytes"
	"unicode/utf8"
)

// MechanismPlain is the SASL PLAIN mechanism's name.
const MechanismPlain = "PLAIN"

// plainServer verifies a PLAIN message (RFC 4616: authzid NUL user NUL
// password) against the user's stored SCRAM credentials: the password is
// salted with each stored credential's salt and iterations and compared
// with its stored key, so PLAIN and SCRAM share one user list and no
// password is kept anywhere.
type plainServer struct {
	creds CredentialLookup
	user  string
	done  bool
}

// maxPlainField bounds a PLAIN user name and password (as Redpanda does).
const maxPlainField = 255

func (p *plainServer) User() string {
	if !p.done {
		return ""
	}
	return p.user
}

func (p *plainServer) Next(msg []byte) ([]byte, bool, error) {
	if p.done {
		return nil, false, authErr("PLAIN exchange is over")
	}
	parts := bytes.Split(msg, []byte{0})
	if len(parts) != 3 {
		return nil, false, authErr("PLAIN message: want authzid NUL user NUL password")
	}
	authzid, user, password := string(parts[0]), string(parts[1]), string(parts[2])
	switch {
	case user == "" || password == "":
		return nil, false, authErr("PLAIN message: empty user name or password")
	case len(user) > maxPlainField || len(password) > maxPlainField:
		return nil, false, authErr("PLAIN message: user name or password too long")
	case !utf8.ValidString(user) || !utf8.ValidString(password) || !utf8.ValidString(authzid):
		return nil, false, authErr("PLAIN message: not UTF-8")
	case authzid != "" && authzid != user:
		// kafka-python sends user NUL user NUL password; another
		// authorization identity is refused, as Kafka does.
		return nil, false, authErr("PLAIN authorization id %q is not the user name", authzid)
	}
	for _, m := range ScramMechanisms {
		if c, ok := p.creds.ScramCredential(user, m.Name); ok && c.VerifyPassword(password) {
			p.user, p.done = user, true
			return []byte{}, true, nil
		}
	}
	return nil, false, authErr("invalid credentials for user %q", user)
}
