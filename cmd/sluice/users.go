package main

// sluice users: the brokers' SCRAM users, through AlterUserScramCredentials
// and DescribeUserScramCredentials (what kafka-configs.sh --entity-type
// users --alter --add-config 'SCRAM-SHA-512=[...]' does).

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/security"
)

func init() {
	registerVerbs("users", "create, list and delete the brokers' SCRAM users", usersActions)
}

var usersActions = []*cliAction{
	{"set", "NAME", "create a SCRAM user or set a new password (--password-stdin)", usersSet},
	{"list", "[NAME...]", "list SCRAM users with their mechanisms and iterations", usersList},
	{"delete", "NAME...", "delete users' SCRAM credentials (all mechanisms, or --mechanism)", usersDelete},
}

func scramMechanismFlag(name string) (kadm.ScramMechanism, error) {
	switch strings.ToUpper(strings.TrimSpace(name)) {
	case "SCRAM-SHA-256":
		return kadm.ScramSha256, nil
	case "SCRAM-SHA-512":
		return kadm.ScramSha512, nil
	}
	return 0, usagef("--mechanism must be SCRAM-SHA-256 or SCRAM-SHA-512, not %q", name)
}

func usersSet(ctx context.Context, env *cliEnv, args []string) error {
	fs, cf := clusterFlags(env, "users set NAME --password-stdin [flags]",
		"Create a SCRAM user, or give it a new password. The broker keeps only a salted\n"+
			"credential; the password is read from stdin (one line) and never shown.", true)
	mech := fs.String("mechanism", "SCRAM-SHA-512", "SCRAM-SHA-256 or SCRAM-SHA-512")
	iterations := fs.Int("iterations", 8192, fmt.Sprintf("PBKDF2 iterations, %d to %d", security.MinScramIterations, security.MaxScramIterations))
	pwStdin := fs.Bool("password-stdin", false, "read the password from stdin (required)")
	pos, err := cf.parse(fs, args, exactlyOne("name exactly one user"))
	if err != nil {
		return err
	}
	m, err := scramMechanismFlag(*mech)
	if err != nil {
		return err
	}
	if err := security.CheckScramIterations(*iterations); err != nil {
		return usagef("--iterations: %v", err)
	}
	if !*pwStdin {
		return usagef("pass the password on stdin with --password-stdin")
	}
	pw, err := readPasswordLine(env.stdin)
	if err != nil {
		return err
	}
	ctx, adm, done, err := cf.adminSession(ctx)
	if err != nil {
		return err
	}
	defer done()
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: pos[0], Mechanism: m, Iterations: int32(*iterations), Password: pw}})
	if err != nil {
		return errKafka("set user", err)
	}
	r := res[pos[0]]
	results := []resultJSON{{Name: pos[0], Status: "set"}}
	if r.Err != nil {
		results[0].Status = "failed"
	}
	if err := writeResults(env, cf, "user", results); err != nil {
		return err
	}
	if r.Err != nil {
		return fmt.Errorf("set user %s: %s", pos[0], kafkaMessage(r.Err, r.ErrMessage))
	}
	return nil
}

// readPasswordLine reads one non-empty line.
func readPasswordLine(r io.Reader) (string, error) {
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil && !(errors.Is(err, io.EOF) && line != "") {
		return "", fmt.Errorf("read the password from stdin: %w", err)
	}
	pw := strings.TrimRight(line, "\r\n")
	if pw == "" {
		return "", errors.New("the password is empty")
	}
	return pw, nil
}

// userJSON is one user in `users list` JSON output.
type userJSON struct {
	Name        string           `json:"name"`
	Credentials []credentialJSON `json:"credentials"`
	Error       string           `json:"error,omitempty"`
}

type credentialJSON struct {
	Mechanism  string `json:"mechanism"`
	Iterations int32  `json:"iterations"`
}

func usersList(ctx context.Context, env *cliEnv, args []string) error {
	fs, cf := clusterFlags(env, "users list [NAME...] [flags]", "List SCRAM users (all, or the named ones) with their mechanisms and iterations.", true)
	ctx, adm, names, done, err := cf.parseAndConnect(ctx, fs, args, anyArgs)
	if err != nil {
		return err
	}
	defer done()
	desc, err := adm.DescribeUserSCRAMs(ctx, names...)
	if err != nil {
		return errKafka("list users", err)
	}
	var users []userJSON
	var failed []string
	for _, d := range desc.Sorted() {
		u := userJSON{Name: d.User, Credentials: []credentialJSON{}}
		for _, c := range d.CredInfos {
			u.Credentials = append(u.Credentials, credentialJSON{Mechanism: c.Mechanism.String(), Iterations: c.Iterations})
		}
		if d.Err != nil {
			if errors.Is(d.Err, kerr.ResourceNotFound) {
				u.Error = "no such user"
			} else {
				u.Error = kafkaMessage(d.Err, d.ErrMessage)
			}
			failed = append(failed, d.User+": "+u.Error)
		}
		users = append(users, u)
	}
	if cf.json() {
		if users == nil {
			users = []userJSON{}
		}
		if err := writeJSON(env.stdout, users); err != nil {
			return err
		}
	} else {
		t := newCLITable(env.stdout, "USER", "MECHANISM", "ITERATIONS")
		for _, u := range users {
			if u.Error != "" {
				t.row(u.Name, u.Error, "")
			}
			for _, c := range u.Credentials {
				t.row(u.Name, c.Mechanism, c.Iterations)
			}
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	return failures("list", failed)
}

func usersDelete(ctx context.Context, env *cliEnv, args []string) error {
	fs, cf := clusterFlags(env, "users delete NAME... [flags]", "Delete users' SCRAM credentials: every mechanism, or only --mechanism. A user without credentials can no longer log in.", true)
	mech := fs.String("mechanism", "", "delete only this mechanism's credential (SCRAM-SHA-256 or SCRAM-SHA-512)")
	ctx, adm, names, done, err := cf.parseAndConnect(ctx, fs, args, atLeastOne("user"))
	if err != nil {
		return err
	}
	defer done()
	var only kadm.ScramMechanism
	if *mech != "" {
		if only, err = scramMechanismFlag(*mech); err != nil {
			return err
		}
	}
	// Without --mechanism: the mechanisms each user has.
	var dels []kadm.DeleteSCRAM
	missing := map[string]bool{}
	if only != 0 {
		for _, n := range names {
			dels = append(dels, kadm.DeleteSCRAM{User: n, Mechanism: only})
		}
	} else {
		desc, err := adm.DescribeUserSCRAMs(ctx, names...)
		if err != nil {
			return errKafka("delete users", err)
		}
		for _, n := range names {
			d := desc[n]
			if len(d.CredInfos) == 0 {
				missing[n] = true
			}
			for _, c := range d.CredInfos {
				dels = append(dels, kadm.DeleteSCRAM{User: n, Mechanism: c.Mechanism})
			}
		}
	}
	res := kadm.AlteredUserSCRAMs{}
	if len(dels) > 0 {
		if res, err = adm.AlterUserSCRAMs(ctx, dels, nil); err != nil {
			return errKafka("delete users", err)
		}
	}
	var results []resultJSON
	var failed []string
	for _, n := range names {
		r, ok := res[n]
		switch {
		case missing[n] || ok && errors.Is(r.Err, kerr.ResourceNotFound):
			results = append(results, resultJSON{Name: n, Status: "failed"})
			failed = append(failed, n+": no such user")
		case !ok:
			results = append(results, resultJSON{Name: n, Status: "no response"})
			failed = append(failed, n+": the broker did not answer for this user")
		case r.Err != nil:
			results = append(results, resultJSON{Name: n, Status: "failed"})
			failed = append(failed, n+": "+kafkaMessage(r.Err, r.ErrMessage))
		default:
			results = append(results, resultJSON{Name: n, Status: "deleted"})
		}
	}
	if err := writeResults(env, cf, "user", results); err != nil {
		return err
	}
	return failures("delete", failed)
}
