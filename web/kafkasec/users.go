package kafkasec

import (
	"crypto/rand"
	"encoding/base64"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluice-io/sluice/templates"
	tpl "github.com/sluice-io/sluice/templates/kafkasec"
	"github.com/sluice-io/sluice/web"
)

// GET /kafka-users, POST /kafka-users, POST /kafka-users/delete: the SCRAM
// credentials (DescribeUserScramCredentials, AlterUserScramCredentials).

// Kafka's bounds on SCRAM iterations (ScramMechanism.java); the form's
// default is twice the minimum.
const (
	minIterations     = 4096
	maxIterations     = 16384
	defaultIterations = 8192
	maxUserBytes      = 255
	maxPasswordBytes  = 1024
)

var mechanisms = map[string]kadm.ScramMechanism{"SCRAM-SHA-256": kadm.ScramSha256, "SCRAM-SHA-512": kadm.ScramSha512}

func newUserForm() templates.Form {
	return templates.NewForm("mechanism", "SCRAM-SHA-512", "iterations", strconv.Itoa(defaultIterations))
}

func (h handler) users(c *fiber.Ctx) error {
	return h.usersPage(c, fiber.StatusOK, newUserForm(), nil)
}

// usersPage lists the users as the brokers describe them now.
func (h handler) usersPage(c *fiber.Ctx, status int, f templates.Form, shown *tpl.ShownPassword) error {
	v := tpl.UsersView{Form: f, Shown: shown}
	ctx, cancel := ctxOf(c)
	defer cancel()
	described, err := h.adm().DescribeUserSCRAMs(ctx)
	if err != nil {
		if v.Refused = refusal(err, "Describe"); v.Refused == "" {
			return web.Unavailable(err)
		}
	}
	for _, d := range described.Sorted() {
		u := tpl.User{Name: d.User}
		if d.Err != nil {
			u.Err = d.Err.Error()
		}
		for _, ci := range d.CredInfos {
			u.Creds = append(u.Creds, tpl.Cred{Mechanism: ci.Mechanism.String(), Iterations: ci.Iterations})
		}
		sort.Slice(u.Creds, func(i, j int) bool { return u.Creds[i].Mechanism < u.Creds[j].Mechanism })
		v.Users = append(v.Users, u)
	}
	if web.WantsJSON(c) {
		return c.Status(status).JSON(fiber.Map{"users": v.Users, "refused": v.Refused, "fields": f.Errors})
	}
	return web.Render(c, status, tpl.UsersPage(web.PageFor(c, "Kafka users"), v))
}

// validUser is Kafka's rule (a name that is not empty) and the console's
// bounds: no control characters, at most 255 bytes.
func validUser(name string) string {
	switch {
	case name == "":
		return "Enter the user's name."
	case len(name) > maxUserBytes:
		return "At most 255 bytes."
	case !utf8.ValidString(name) || strings.IndexFunc(name, unicode.IsControl) >= 0:
		return "Letters, digits and punctuation only (no control characters)."
	}
	return ""
}

// generatePassword is 24 characters from 144 random bits.
func generatePassword() string {
	b := make([]byte, 18)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// POST /kafka-users: create a user's credential or replace its password
// (an upsertion, as kafka-configs.sh --alter --add-config does). An empty
// password is generated and shown once.
func (h handler) setPassword(c *fiber.Ctx) error {
	name := strings.TrimSpace(strings.Clone(c.FormValue("user")))
	mech := strings.Clone(c.FormValue("mechanism"))
	iterText := strings.TrimSpace(strings.Clone(c.FormValue("iterations")))
	pw, confirm := c.FormValue("password"), c.FormValue("confirm")
	f := templates.NewForm("user", name, "mechanism", mech, "iterations", iterText)
	if msg := validUser(name); msg != "" {
		f.Fail("user", msg)
	}
	m, ok := mechanisms[mech]
	if !ok {
		f.Fail("mechanism", "Pick SCRAM-SHA-256 or SCRAM-SHA-512.")
	}
	iterations, err := strconv.Atoi(iterText)
	if err != nil || iterations < minIterations || iterations > maxIterations {
		f.Fail("iterations", "A number from 4096 to 16384 (Kafka's bounds).")
	}
	generated := pw == ""
	switch {
	case generated && confirm != "":
		f.Fail("password", "Type the password here too, or leave both empty to generate one.")
	case len(pw) > maxPasswordBytes:
		f.Fail("password", "At most 1024 bytes.")
	case !generated && pw != confirm:
		f.Fail("confirm", "The two passwords differ.")
	}
	if !f.OK() {
		return h.usersPage(c, fiber.StatusUnprocessableEntity, f, nil)
	}
	if generated {
		pw = generatePassword()
	}
	ctx, cancel := ctxOf(c)
	defer cancel()
	res, err := h.adm().AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: name, Mechanism: m, Iterations: int32(iterations), Password: pw}})
	if err == nil {
		if r, ok := res[name]; ok && r.Err != nil {
			err = kafkaErr(r.Err, r.ErrMessage)
		}
	}
	how := "typed"
	if generated {
		how = "generated"
	}
	web.Audit(c, "kafka_user.set", name, "mechanism="+mech+" iterations="+iterText+" password="+how, err)
	if err != nil {
		if msg := refusal(err, "Alter"); msg != "" {
			f.Err = msg
		} else {
			f.Err = "Not changed: " + err.Error()
		}
		return h.usersPage(c, fiber.StatusUnprocessableEntity, f, nil)
	}
	if generated {
		// Shown on this answer only: not in a flash, not in a redirect.
		return h.usersPage(c, fiber.StatusOK, newUserForm(), &tpl.ShownPassword{User: name, Mechanism: mech, Password: pw})
	}
	web.Flash(c, "ok", mech+" password of "+name+" set ("+iterText+" iterations).")
	return web.SeeOther(c, "/kafka-users")
}

// POST /kafka-users/delete: remove one credential of a user (both, for
// mechanism "all"); a user without credentials is gone.
func (h handler) deleteCred(c *fiber.Ctx) error {
	name := strings.Clone(c.FormValue("user"))
	mech := strings.Clone(c.FormValue("mechanism"))
	var dels []kadm.DeleteSCRAM
	if m, ok := mechanisms[mech]; ok {
		dels = append(dels, kadm.DeleteSCRAM{User: name, Mechanism: m})
	} else if mech != "all" {
		return web.BadRequest("mechanism must be SCRAM-SHA-256, SCRAM-SHA-512 or all")
	}
	if validUser(name) != "" {
		return web.BadRequest("malformed user name")
	}
	ctx, cancel := ctxOf(c)
	defer cancel()
	if mech == "all" {
		described, err := h.adm().DescribeUserSCRAMs(ctx, name)
		if err != nil {
			return h.deleteDone(c, name, mech, err)
		}
		for _, ci := range described[name].CredInfos {
			dels = append(dels, kadm.DeleteSCRAM{User: name, Mechanism: ci.Mechanism})
		}
		if len(dels) == 0 {
			web.Flash(c, "bad", "Kafka user "+name+" has no credentials.")
			return web.SeeOther(c, "/kafka-users")
		}
	}
	res, err := h.adm().AlterUserSCRAMs(ctx, dels, nil)
	if err == nil {
		if r, ok := res[name]; ok && r.Err != nil {
			err = kafkaErr(r.Err, r.ErrMessage)
		}
	}
	return h.deleteDone(c, name, mech, err)
}

func (h handler) deleteDone(c *fiber.Ctx, name, mech string, err error) error {
	web.Audit(c, "kafka_user.delete", name, "mechanism="+mech, err)
	switch {
	case err == nil && mech == "all":
		web.Flash(c, "ok", "Kafka user "+name+" removed: it can no longer authenticate.")
	case err == nil:
		web.Flash(c, "ok", mech+" credential of "+name+" removed.")
	case refusal(err, "Alter") != "":
		web.Flash(c, "bad", refusal(err, "Alter"))
	default:
		web.Flash(c, "bad", "Not removed: "+err.Error())
	}
	return web.SeeOther(c, "/kafka-users")
}

// kafkaErr is a per-item Kafka error with the broker's message.
func kafkaErr(err error, msg string) error {
	if msg == "" {
		return err
	}
	return &withMessage{err: err, msg: msg}
}

type withMessage struct {
	err error
	msg string
}

func (e *withMessage) Error() string { return e.err.Error() + ": " + e.msg }
func (e *withMessage) Unwrap() error { return e.err }
