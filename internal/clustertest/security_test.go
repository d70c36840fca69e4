package clustertest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/kclient"
	"github.com/sluice-io/sluice/internal/testutil"
	"github.com/sluice-io/sluice/security"
)

// The cluster's security, chosen by $SLUICE_CLUSTER_SECURITY for every
// cluster the package starts:
//
//   - "" or "plaintext": one PLAINTEXT listener per broker, between brokers
//     and for the tests' clients (the default);
//   - "sasl_ssl": one listener per broker, BROKER, of protocol SASL_SSL
//     (SCRAM-SHA-512, a CA and a server certificate generated when the
//     cluster starts), which is inter.broker.listener.name: replica
//     fetchers, controlled shutdown and the controller's requests go over
//     it, the brokers logged in as User:broker. The authorizer is on
//     (allow.everyone.if.no.acl.found=false) with User:broker and
//     User:admin in super.users; every client of the tests — kgo clients,
//     the sluice CLI (--command-config), kcat, the consoles and schema
//     registries (console.kafka.*) — logs in as admin over the same
//     listener.
const (
	securityPlaintext = "plaintext"
	securitySASLSSL   = "sasl_ssl"
)

// securityFromEnv is $SLUICE_CLUSTER_SECURITY, checked.
func securityFromEnv() (string, error) {
	switch v := strings.ToLower(strings.TrimSpace(os.Getenv("SLUICE_CLUSTER_SECURITY"))); v {
	case "", securityPlaintext:
		return securityPlaintext, nil
	case securitySASLSSL:
		return v, nil
	default:
		return "", fmt.Errorf("SLUICE_CLUSTER_SECURITY=%s: want plaintext or sasl_ssl", v)
	}
}

// clusterSecurity is what the brokers and the clients of a SASL_SSL
// cluster share: files under the cluster's directory, and the clients'
// franz-go options.
type clusterSecurity struct {
	trustPath    string // the CA certificate (ssl.truststore.location)
	keystorePath string // the brokers' key and certificate (ssl.keystore.location)
	secretsPath  string // broker.password and admin.password, read through ${file:...}
	clientProps  string // the admin's client properties (--command-config)
	admin        string // the admin's password
	opts         []kgo.Opt
}

const (
	brokerUser = "broker"
	adminUser  = "admin"
)

// setupSASLSSL makes the certificates, the passwords and the client
// properties in dir, and stores the SCRAM-SHA-512 credentials of broker and
// admin in ZooKeeper under the brokers' chroot before any broker starts,
// as `kafka-configs.sh --zookeeper --add-config SCRAM-SHA-512=...` does to
// bootstrap a Kafka cluster (the first user cannot be created through a
// broker that only admits users).
func setupSASLSSL(dir, zkAddr string) (*clusterSecurity, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ca, err := testutil.NewCAIn(dir, "Sluice Cluster Test CA")
	if err != nil {
		return nil, err
	}
	srv, err := ca.ServerCert("broker")
	if err != nil {
		return nil, err
	}
	s := &clusterSecurity{trustPath: ca.TrustPath, keystorePath: srv.KeystorePath,
		secretsPath: filepath.Join(dir, "secrets.properties"), clientProps: filepath.Join(dir, "admin.properties"),
		admin: "admin-secret"}
	passwords := map[string]string{brokerUser: "broker-secret", adminUser: s.admin}
	secrets := fmt.Sprintf("broker.password=%s\nadmin.password=%s\n", passwords[brokerUser], passwords[adminUser])
	if err := os.WriteFile(s.secretsPath, []byte(secrets), 0o600); err != nil {
		return nil, err
	}
	props := strings.Join([]string{
		"security.protocol=SASL_SSL",
		"sasl.mechanism=SCRAM-SHA-512",
		"sasl.username=" + adminUser,
		"sasl.password=${file:" + s.secretsPath + ":admin.password}",
		"ssl.truststore.location=" + s.trustPath,
	}, "\n") + "\n"
	if err := os.WriteFile(s.clientProps, []byte(props), 0o600); err != nil {
		return nil, err
	}
	// The tests' kgo clients read the same file, as the CLI does.
	kv, err := kclient.ReadFile(s.clientProps)
	if err != nil {
		return nil, err
	}
	st, err := kclient.Parse(kv)
	if err != nil {
		return nil, err
	}
	s.opts = st.Opts()
	if err := storeScramUsers(zkAddr, passwords); err != nil {
		return nil, fmt.Errorf("SCRAM users in zookeeper: %w", err)
	}
	return s, nil
}

// storeScramUsers writes /config/users/<name> under the chroot in Kafka's
// format ({"version":1,"config":{"SCRAM-SHA-512":"salt=...,..."}}).
func storeScramUsers(zkAddr string, passwords map[string]string) error {
	conn, _, err := zk.Connect([]string{zkAddr}, 30*time.Second, zk.WithLogInfo(false), zk.WithLogger(quietZK{}))
	if err != nil {
		return err
	}
	defer conn.Close()
	acl := zk.WorldACL(zk.PermAll)
	for _, p := range []string{zkChroot, zkChroot + "/config", zkChroot + "/config/users"} {
		if _, err := conn.Create(p, nil, 0, acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", p, err)
		}
	}
	mech, _ := security.ScramMechanismNamed("SCRAM-SHA-512")
	for user, pw := range passwords {
		cred, err := mech.NewCredential(pw, 4096)
		if err != nil {
			return err
		}
		data, err := json.Marshal(map[string]any{"version": 1, "config": map[string]string{mech.Name: cred.String()}})
		if err != nil {
			return err
		}
		if _, err := conn.Create(zkChroot+"/config/users/"+user, data, 0, acl); err != nil {
			return fmt.Errorf("create user %s: %w", user, err)
		}
	}
	return nil
}

// brokerArgs are the overrides of a broker of a SASL_SSL cluster
// listening on addr.
func (s *clusterSecurity) brokerArgs(addr string) []string {
	secret := func(key string) string { return "${file:" + s.secretsPath + ":" + key + "}" }
	return []string{
		"listeners=BROKER://" + addr,
		"listener.security.protocol.map=BROKER:SASL_SSL",
		"inter.broker.listener.name=BROKER",
		"sasl.enabled.mechanisms=SCRAM-SHA-512",
		"sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512",
		`listener.name.broker.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="` +
			brokerUser + `" password="` + secret("broker.password") + `";`,
		"ssl.keystore.location=" + s.keystorePath,
		"ssl.truststore.location=" + s.trustPath,
		"authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
		"super.users=User:" + brokerUser + ";User:" + adminUser,
		"allow.everyone.if.no.acl.found=false",
		"console.kafka.security.protocol=SASL_SSL",
		"console.kafka.sasl.mechanism=SCRAM-SHA-512",
		"console.kafka.sasl.username=" + adminUser,
		"console.kafka.sasl.password=" + secret("admin.password"),
		"console.kafka.ssl.truststore.location=" + s.trustPath,
	}
}

// clientOpts are the franz-go options of the tests' clients (none for a
// PLAINTEXT cluster).
func (c *testCluster) clientOpts() []kgo.Opt {
	if c.sec == nil {
		return nil
	}
	return c.sec.opts
}

// cliArgs are the sluice CLI's flags for the tests' client settings.
func (c *testCluster) cliArgs() []string {
	if c.sec == nil {
		return nil
	}
	return []string{"--command-config", c.sec.clientProps}
}

// kcatArgs are kcat's (librdkafka's) properties for the tests' client
// settings.
func (c *testCluster) kcatArgs() []string {
	if c.sec == nil {
		return nil
	}
	return []string{"-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-512",
		"-X", "sasl.username=" + adminUser, "-X", "sasl.password=" + c.sec.admin, "-X", "ssl.ca.location=" + c.sec.trustPath}
}
