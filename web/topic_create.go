package web

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/config"
	"github.com/sluice-io/sluice/internal/human"
	"github.com/sluice-io/sluice/kafkaview"
	"github.com/sluice-io/sluice/templates"
)

// GET /topics/new, POST /topics: the create-topic form. Every field is
// checked here first (so mistakes come back next to the field that has them,
// with what was typed kept), then the broker's own refusal is mapped back
// onto the field it concerns.

type topicCreator interface {
	Metadata(ctx context.Context, maxAge time.Duration) (*kafkaview.Snapshot, error)
	CreateTopic(ctx context.Context, t kafkaview.NewTopic, validateOnly bool) error
}

type topicCreate struct{ kc topicCreator }

func (h topicCreate) brokers(c *fiber.Ctx) int {
	if snap, err := h.kc.Metadata(requestCtx(c), 10*time.Second); err == nil {
		return len(snap.Brokers)
	}
	return 0
}

func (h topicCreate) get(c *fiber.Ctx) error {
	v := templates.TopicCreateView{Form: templates.NewForm(), Brokers: h.brokers(c)}
	return Render(c, fiber.StatusOK, templates.TopicCreatePage(PageFor(c, "Create topic", templates.Crumb{Label: "Topics", Href: "/topics"}), v))
}

var topicCreateFields = []string{"name", "partitions", "replication", "cleanup.policy", "retention.ms", "configs"}

// parseNewTopic validates the form into a NewTopic, recording field errors.
func parseNewTopic(f *templates.Form, brokers int) kafkaview.NewTopic {
	t := kafkaview.NewTopic{Name: f.Get("name"), Partitions: -1, Replication: -1, Configs: map[string]string{}}
	if err := kafkaview.ValidateTopicName(t.Name); err != nil {
		f.Fail("name", err.Error())
	}
	if p := f.Get("partitions"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 10000 {
			f.Fail("partitions", "Enter a whole number from 1 to 10000, or leave empty for the broker default.")
		} else {
			t.Partitions = int32(n)
		}
	}
	if r := f.Get("replication"); r != "" {
		n, err := strconv.Atoi(r)
		switch {
		case err != nil || n < 1 || n > 32:
			f.Fail("replication", "Enter a whole number from 1 to 32, or leave empty for the broker default.")
		case brokers > 0 && n > brokers:
			f.Fail("replication", fmt.Sprintf("The cluster has %d broker(s); a partition cannot have more replicas than that.", brokers))
		default:
			t.Replication = int16(n)
		}
	}
	if p := f.Get("cleanup.policy"); p != "" {
		if _, err := config.ParseCleanupPolicy(p); err != nil {
			f.Fail("cleanup.policy", "Choose delete, compact, or both.")
		} else {
			t.Configs["cleanup.policy"] = p
		}
	}
	if r := f.Get("retention.ms"); r != "" {
		n, err := human.ParseMillis(r)
		if err != nil || n < -1 {
			f.Fail("retention.ms", "Enter a duration such as 7d, 12h or 30min, milliseconds, or -1 to keep records forever.")
		} else {
			t.Configs["retention.ms"] = strconv.FormatInt(n, 10)
		}
	}
	extra, err := kafkaview.ParseConfigLines(f.Get("configs"))
	if err != nil {
		f.Fail("configs", err.Error())
	}
	for k, v := range extra {
		if _, dup := t.Configs[k]; dup {
			f.Fail("configs", k+" is set above already.")
			continue
		}
		kv, err := templates.ConfigValueFromForm(k, v)
		if err != nil {
			f.Fail("configs", k+": "+err.Error())
			continue
		}
		t.Configs[k] = kv
	}
	return t
}

func (h topicCreate) post(c *fiber.Ctx) error {
	f := templates.NewForm()
	for _, k := range topicCreateFields {
		f.Set(k, strings.TrimSpace(c.FormValue(k)))
	}
	brokers := h.brokers(c)
	t := parseNewTopic(&f, brokers)
	render := func(status int) error {
		if WantsJSON(c) {
			return c.Status(status).JSON(fiber.Map{"error": "invalid topic", "fields": f.Errors, "detail": f.Err})
		}
		v := templates.TopicCreateView{Form: f, Brokers: brokers}
		return Render(c, status, templates.TopicCreatePage(PageFor(c, "Create topic", templates.Crumb{Label: "Topics", Href: "/topics"}), v))
	}
	if !f.OK() {
		return render(fiber.StatusUnprocessableEntity)
	}
	err := h.kc.CreateTopic(requestCtx(c), t, false)
	Audit(c, "topic.create", t.Name, describeNewTopic(t), err)
	if err != nil {
		var ke *kafkaview.KafkaError
		if !errors.As(err, &ke) {
			f.Err = "The cluster did not answer: " + err.Error()
			return render(fiber.StatusServiceUnavailable)
		}
		switch {
		case errors.Is(err, kerr.TopicAlreadyExists):
			f.Fail("name", "A topic with this name exists already.")
		case errors.Is(err, kerr.InvalidTopicException):
			f.Fail("name", ke.Error())
		case errors.Is(err, kerr.InvalidPartitions):
			f.Fail("partitions", ke.Error())
		case errors.Is(err, kerr.InvalidReplicationFactor):
			f.Fail("replication", ke.Error())
		case errors.Is(err, kerr.InvalidConfig), errors.Is(err, kerr.PolicyViolation):
			f.Fail("configs", ke.Error())
		default:
			f.Err = ke.Error()
		}
		return render(fiber.StatusUnprocessableEntity)
	}
	if WantsJSON(c) {
		return c.Status(fiber.StatusCreated).JSON(fiber.Map{"topic": t.Name})
	}
	Flash(c, "ok", "Topic "+t.Name+" created.")
	return SeeOther(c, templates.TopicURL(t.Name))
}

func describeNewTopic(t kafkaview.NewTopic) string {
	orDefault := func(n int) string {
		if n < 0 {
			return "default"
		}
		return strconv.Itoa(n)
	}
	d := "partitions=" + orDefault(int(t.Partitions)) + " replication=" + orDefault(int(t.Replication))
	keys := make([]string, 0, len(t.Configs))
	for k := range t.Configs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		d += " " + k + "=" + t.Configs[k]
	}
	return d
}
