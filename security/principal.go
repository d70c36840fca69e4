package security

// Principal is who a connection authenticated as (Kafka's KafkaPrincipal).
type Principal struct{ Type, Name string }

// Anonymous is the principal of a connection that did not authenticate.
var Anonymous = Principal{Type: "User", Name: "ANONYMOUS"}

func (p Principal) String() string { return p.Type + ":" + p.Name }
