package main

// sluice console user add|passwd|list: manage console users on the host,
// in the console database (console.data.dir/console.db). This is how an
// admin is created without the one-time setup link, and how a lost admin
// password is reset. Works while `sluice serve` runs (SQLite WAL) or not:
// the change is made in this host's database at once and queued there, and
// the console on this host publishes it to the whole cluster (the console
// topic) as soon as it runs.
//
// sluice console backup FILE, sluice console restore FILE: a consistent
// copy of console.db (VACUUM INTO, while serving), and putting one back
// (with the service stopped).

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-io/sluice/appliance"
	"github.com/sluice-io/sluice/consoledb"
)

func init() {
	register(&command{
		name:    "console",
		summary: "manage console users (console user add|passwd|list), back up and restore console.db",
		run: func(ctx context.Context, args []string) int {
			return consoleMain(ctx, args, os.Stdin, os.Stdout, os.Stderr)
		},
	})
}

const consoleUsage = `Usage:
  sluice console user add [--role viewer|operator|admin] [--password-stdin] NAME
  sluice console user passwd [--password-stdin] NAME
  sluice console user list [--json]
  sluice console backup FILE
  sluice console restore FILE

Every command also takes:
  --config FILE    the properties file of sluice serve; console.data.dir is read from it
  --data-dir DIR   the console data directory (overrides --config; default ./data/console)

Without --password-stdin the password is asked twice on the terminal.
Roles: viewer reads everything; operator also changes topics, messages and
offsets; admin also manages users and reads the audit log.

A user added or changed here is in this host's console at once, and the
console on this host shares it with the cluster as soon as it runs.

backup writes a consistent copy of console.db to FILE (mode 0600) while
sluice serve runs. restore puts FILE back as console.db (stop sluice serve
first; the replaced database is kept as console.db.replaced-<time>): the
host then catches up with the cluster's console state from where the
backup was, or, when the cluster's console topic is gone, publishes it.
`

func consoleMain(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "--help" || args[0] == "-h" || args[0] == "help" {
		fmt.Fprint(stdout, consoleUsage)
		if len(args) == 0 {
			return exitUsage
		}
		return 0
	}
	if args[0] == "backup" || args[0] == "restore" {
		return consoleBackup(ctx, args[0], args[1:], stdout, stderr)
	}
	if args[0] != "user" || len(args) < 2 {
		fmt.Fprintf(stderr, "sluice console: unknown command %q\n\n%s", strings.Join(args, " "), consoleUsage)
		return exitUsage
	}
	verb, rest := args[1], args[2:]
	fs := flag.NewFlagSet("console user "+verb, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	configPath := fs.String("config", "", "")
	dataDir := fs.String("data-dir", "", "")
	role := fs.String("role", "viewer", "")
	pwStdin := fs.Bool("password-stdin", false, "")
	asJSON := fs.Bool("json", false, "")
	pos, err := consoleParse(fs, rest)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, consoleUsage)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "sluice console user %s: %v\n\n%s", verb, err, consoleUsage)
		return exitUsage
	}
	dir, err := consoleDataDir(*configPath, *dataDir)
	if err != nil {
		fmt.Fprintf(stderr, "sluice console: %v\n", err)
		return exitUsage
	}
	wantArgs := 1
	if verb == "list" {
		wantArgs = 0
	}
	if len(pos) != wantArgs {
		fmt.Fprintf(stderr, "sluice console user %s: want %d argument(s), got %d\n\n%s", verb, wantArgs, len(pos), consoleUsage)
		return exitUsage
	}
	switch verb {
	case "add", "passwd", "list":
	default:
		fmt.Fprintf(stderr, "sluice console: unknown command user %q\n\n%s", verb, consoleUsage)
		return exitUsage
	}
	db, store, err := consoledb.OpenConsole(ctx, dir)
	if err != nil {
		fmt.Fprintf(stderr, "sluice console: %v\n", err)
		return 1
	}
	defer db.Close()
	who := "cli"
	if u, err := user.Current(); err == nil {
		who = "cli:" + u.Username
	}
	ctx = consoledb.WithActor(ctx, who)
	if verb != "list" {
		// Made here at once, and queued for the console on this host to
		// publish to the cluster (see consoledb.QueueForCluster).
		if err := db.QueueForCluster(ctx); err != nil {
			fmt.Fprintf(stderr, "sluice console: %v\n", err)
			return 1
		}
	}
	audit := func(action, target, detail string, err error) {
		e := consoledb.AuditEntry{User: who, Action: action, Target: target, Detail: detail, RemoteAddr: "local"}
		if err != nil {
			e.Outcome = err.Error()
		}
		store.AppendAudit(context.WithoutCancel(ctx), e)
	}

	switch verb {
	case "list":
		users, err := store.Users(ctx)
		if err != nil {
			fmt.Fprintf(stderr, "sluice console: %v\n", err)
			return 1
		}
		if *asJSON {
			type row struct {
				Name      string     `json:"name"`
				Role      string     `json:"role"`
				CreatedAt time.Time  `json:"created_at"`
				LastLogin *time.Time `json:"last_login_at"`
			}
			out := make([]row, 0, len(users))
			for _, u := range users {
				r := row{Name: u.Name, Role: string(u.Role), CreatedAt: u.CreatedAt}
				if !u.LastLoginAt.IsZero() {
					t := u.LastLoginAt
					r.LastLogin = &t
				}
				out = append(out, r)
			}
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			enc.Encode(out)
			return 0
		}
		if len(users) == 0 {
			fmt.Fprintln(stdout, "no console users yet: create an admin with `sluice console user add --role admin NAME`")
			return 0
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tROLE\tCREATED\tLAST SIGN-IN")
		for _, u := range users {
			last := "never"
			if !u.LastLoginAt.IsZero() {
				last = u.LastLoginAt.Local().Format("2006-01-02 15:04")
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", u.Name, u.Role, u.CreatedAt.Local().Format("2006-01-02 15:04"), last)
		}
		tw.Flush()
		return 0

	case "add":
		name := pos[0]
		r, err := consoledb.ParseRole(*role)
		if err != nil {
			fmt.Fprintf(stderr, "sluice console user add: %v\n", err)
			return exitUsage
		}
		if err := consoledb.ValidateUsername(name); err != nil {
			fmt.Fprintf(stderr, "sluice console user add: %v\n", err)
			return exitUsage
		}
		pw, err := consolePassword(stdin, stderr, *pwStdin)
		if err != nil {
			fmt.Fprintf(stderr, "sluice console user add: %v\n", err)
			return 1
		}
		_, err = store.CreateUser(ctx, name, r, pw)
		audit("user.add", name, "role="+string(r), err)
		if err != nil {
			fmt.Fprintf(stderr, "sluice console user add: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "user %s added as %s\n", name, r)
		return 0

	default: // passwd
		name := pos[0]
		u, err := store.UserByName(ctx, name)
		if errors.Is(err, consoledb.ErrNotFound) {
			fmt.Fprintf(stderr, "sluice console user passwd: no user %q (see `sluice console user list`)\n", name)
			return 1
		}
		if err != nil {
			fmt.Fprintf(stderr, "sluice console user passwd: %v\n", err)
			return 1
		}
		pw, err := consolePassword(stdin, stderr, *pwStdin)
		if err != nil {
			fmt.Fprintf(stderr, "sluice console user passwd: %v\n", err)
			return 1
		}
		err = store.SetPassword(ctx, u.ID, pw, consoledb.UserBase{})
		audit("user.password", u.Name, "set on the host; sessions ended", err)
		if err != nil {
			fmt.Fprintf(stderr, "sluice console user passwd: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "password of %s changed; their sessions were ended\n", u.Name)
		return 0
	}
}

// consoleParse parses flags that may come before or after the positional
// arguments.
func consoleParse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// consoleDataDir is --data-dir, else console.data.dir of --config, else the
// default of console.data.dir.
func consoleDataDir(configPath, dataDir string) (string, error) {
	if dataDir != "" {
		return dataDir, nil
	}
	cfg, err := appliance.Load(configPath, nil)
	if err != nil {
		return "", err
	}
	if cfg.ConsoleDataDir == "" {
		return "", errors.New("console.data.dir is empty in " + configPath)
	}
	return cfg.ConsoleDataDir, nil
}

// consolePassword reads a new password: one line from stdin with
// --password-stdin, otherwise twice from the terminal without echo.
func consolePassword(stdin io.Reader, stderr io.Writer, fromStdin bool) (string, error) {
	if fromStdin {
		line, err := bufio.NewReader(stdin).ReadString('\n')
		if err != nil && !(errors.Is(err, io.EOF) && line != "") {
			return "", fmt.Errorf("read the password from stdin: %w", err)
		}
		pw := strings.TrimRight(line, "\r\n")
		return pw, consoledb.ValidatePassword(pw)
	}
	f, ok := stdin.(*os.File)
	if !ok {
		return "", errors.New("stdin is not a terminal: pass the password with --password-stdin")
	}
	fd := int(f.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return "", errors.New("stdin is not a terminal: pass the password with --password-stdin")
	}
	noEcho := *old
	noEcho.Lflag &^= unix.ECHO
	noEcho.Lflag |= unix.ICANON | unix.ISIG
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &noEcho); err != nil {
		return "", fmt.Errorf("turn off terminal echo: %w", err)
	}
	defer unix.IoctlSetTermios(fd, unix.TCSETS, old)
	r := bufio.NewReader(f)
	ask := func(prompt string) (string, error) {
		fmt.Fprint(stderr, prompt)
		line, err := r.ReadString('\n')
		fmt.Fprintln(stderr)
		return strings.TrimRight(line, "\r\n"), err
	}
	pw, err := ask("New password: ")
	if err != nil {
		return "", err
	}
	if err := consoledb.ValidatePassword(pw); err != nil {
		return "", err
	}
	again, err := ask("Repeat it: ")
	if err != nil {
		return "", err
	}
	if again != pw {
		return "", errors.New("the passwords differ")
	}
	return pw, nil
}

// consoleBackup runs sluice console backup|restore FILE.
func consoleBackup(ctx context.Context, verb string, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("console "+verb, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	configPath := fs.String("config", "", "")
	dataDir := fs.String("data-dir", "", "")
	pos, err := consoleParse(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, consoleUsage)
		return 0
	}
	if err == nil && len(pos) != 1 {
		err = fmt.Errorf("want one FILE, got %d arguments", len(pos))
	}
	if err != nil {
		fmt.Fprintf(stderr, "sluice console %s: %v\n\n%s", verb, err, consoleUsage)
		return exitUsage
	}
	dir, err := consoleDataDir(*configPath, *dataDir)
	if err != nil {
		fmt.Fprintf(stderr, "sluice console: %v\n", err)
		return exitUsage
	}
	file := pos[0]
	if verb == "backup" {
		db, err := consoledb.Open(ctx, filepath.Join(dir, consoledb.FileName))
		if err != nil {
			fmt.Fprintf(stderr, "sluice console backup: %v\n", err)
			return 1
		}
		defer db.Close()
		if err := db.BackupTo(ctx, file); err != nil {
			fmt.Fprintf(stderr, "sluice console backup: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "console database copied to %s\n", file)
		return 0
	}
	replaced, err := consoledb.Restore(ctx, file, dir)
	if err != nil {
		fmt.Fprintf(stderr, "sluice console restore: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "console database restored from %s", file)
	if replaced != "" {
		fmt.Fprintf(stdout, "; the one it replaced is %s", replaced)
	}
	fmt.Fprintln(stdout)
	return 0
}
