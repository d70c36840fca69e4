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
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/kafkaview"
	"github.com/sluice-io/sluice/templates"
)

// GET /topics/:name/elect: which partitions are not led by their
// preferred replica and which have no leader. POST /topics/:name/elect:
// a preferred leader election for the topic, or (type=unclean, with
// confirm=lose-records) an unclean election for one partition without a
// leader, over Kafka's ElectLeaders; results per partition in words.

// electTimeout bounds one ElectLeaders request.
const electTimeout = 30 * time.Second

type leaderElector interface {
	topicDescriber
	Admin() *kadm.Client
}

type topicElect struct {
	kc leaderElector
}

func (h topicElect) get(c *fiber.Ctx) error {
	name, err := PathParam(c, "name")
	if err != nil {
		return err
	}
	v, err := h.view(c, name)
	if err != nil {
		return err
	}
	return h.render(c, fiber.StatusOK, v)
}

func (h topicElect) view(c *fiber.Ctx, name string) (templates.ElectView, error) {
	d, err := h.kc.Topic(requestCtx(c), name)
	if err != nil {
		if errors.Is(err, kafkaview.ErrUnknownTopic) || isUnknownTopic(err) {
			return templates.ElectView{}, NotFound("topic "+name, "It may have been deleted. The Topics page lists the ones that exist.")
		}
		return templates.ElectView{}, Unavailable(err)
	}
	v := templates.ElectView{Topic: name}
	for _, p := range d.Partitions {
		ep := templates.ElectPartition{PartitionMeta: p.PartitionMeta, Preferred: -1}
		if len(p.Replicas) > 0 {
			ep.Preferred = p.Replicas[0]
		}
		switch {
		case p.Leader < 0:
			ep.State = "none"
			v.Leaderless++
		case p.Leader == ep.Preferred:
			ep.State = "preferred"
		default:
			ep.State = "other"
			v.NotPreferred++
		}
		v.Partitions = append(v.Partitions, ep)
	}
	return v, nil
}

func (h topicElect) render(c *fiber.Ctx, status int, v templates.ElectView) error {
	if WantsJSON(c) {
		return c.Status(status).JSON(fiber.Map{"topic": v.Topic, "partitions": v.Partitions, "not_preferred": v.NotPreferred,
			"leaderless": v.Leaderless, "results": v.Results, "unclean": v.Unclean, "error": v.Err})
	}
	p := PageFor(c, "Leader elections", templates.Crumb{Label: "Topics", Href: "/topics"}, templates.Crumb{Label: v.Topic, Href: string(templates.TopicURL(v.Topic))})
	return Render(c, status, templates.ElectPage(p, v))
}

func (h topicElect) post(c *fiber.Ctx) error {
	name, err := PathParam(c, "name")
	if err != nil {
		return err
	}
	unclean := false
	switch c.FormValue("type") {
	case "preferred":
	case "unclean":
		unclean = true
	default:
		return BadRequest("type must be preferred or unclean")
	}
	v, err := h.view(c, name)
	if err != nil {
		return err
	}
	set := kadm.TopicsSet{}
	how, action := kadm.ElectPreferredReplica, "topic.elect-preferred"
	target := name
	if unclean {
		how, action = kadm.ElectLiveReplica, "topic.elect-unclean"
		part, perr := strconv.ParseInt(c.FormValue("partition"), 10, 32)
		if perr != nil || part < 0 || int(part) >= len(v.Partitions) {
			return BadRequest("partition must be one of the topic's partitions")
		}
		if c.FormValue("confirm") != "lose-records" {
			v.Err = "Not run: tick the box accepting that records the new leader never received are lost."
			return h.render(c, fiber.StatusUnprocessableEntity, v)
		}
		set.Add(name, int32(part))
		target = name + "/" + strconv.Itoa(int(part))
	} else {
		for _, p := range v.Partitions {
			set.Add(name, p.Partition)
		}
	}
	ctx, cancel := context.WithTimeout(requestCtx(c), electTimeout)
	defer cancel()
	res, err := h.kc.Admin().ElectLeaders(ctx, how, set)
	v.Unclean = unclean
	if err != nil {
		Audit(c, action, target, "", err)
		v.Err = "Not run: " + electRefusal(err)
		return h.render(c, fiber.StatusUnprocessableEntity, v)
	}
	var counts = map[string]int{}
	var failed error
	for _, r := range res[name] {
		er := electResult(r, unclean)
		counts[er.Kind]++
		if er.Kind == "bad" && failed == nil {
			failed = r.Err
		}
		v.Results = append(v.Results, er)
	}
	sort.Slice(v.Results, func(i, j int) bool { return v.Results[i].Partition < v.Results[j].Partition })
	if v.Results == nil {
		v.Results = []templates.ElectResult{}
	}
	detail := fmt.Sprintf("elected=%d not-needed=%d failed=%d", counts["ok"], counts["info"], counts["bad"])
	if unclean && failed != nil {
		Audit(c, action, target, detail, failed)
	} else {
		Audit(c, action, target, detail, nil)
	}
	// The leadership after the election.
	if after, err := h.view(c, name); err == nil {
		after.Results, after.Unclean = v.Results, v.Unclean
		v = after
	}
	return h.render(c, fiber.StatusOK, v)
}

// electResult is one partition's outcome in words.
func electResult(r kadm.ElectLeadersResult, unclean bool) templates.ElectResult {
	out := templates.ElectResult{Partition: r.Partition}
	var ke *kerr.Error
	if errors.As(r.Err, &ke) {
		out.Code = ke.Message
	}
	switch {
	case r.Err == nil && unclean:
		out.Kind, out.Text = "ok", "A new leader was elected."
	case r.Err == nil:
		out.Kind, out.Text = "ok", "Its preferred replica leads it now."
	case errors.Is(r.Err, kerr.ElectionNotNeeded) && unclean:
		out.Kind, out.Text, out.Code = "info", "It has a leader: no unclean election was needed, nothing was lost.", ""
	case errors.Is(r.Err, kerr.ElectionNotNeeded):
		out.Kind, out.Text, out.Code = "info", "Already led by its preferred replica.", ""
	case errors.Is(r.Err, kerr.PreferredLeaderNotAvailable):
		out.Kind, out.Text = "bad", "Its preferred replica cannot lead now: its broker is down or it is not in sync."
	case errors.Is(r.Err, kerr.EligibleLeadersNotAvailable):
		out.Kind, out.Text = "bad", "No replica of it is live: there is no broker to make leader. Bring one of its replicas' brokers back."
	case errors.Is(r.Err, kerr.UnknownTopicOrPartition):
		out.Kind, out.Text = "bad", "The brokers do not know this partition (deleted meanwhile?)."
	case errors.Is(r.Err, kerr.InvalidTopicException):
		out.Kind, out.Text = "bad", "Elections are not allowed on this topic."
	default:
		out.Kind, out.Text = "bad", "Not elected: "+r.Err.Error()
	}
	if r.ErrMessage != "" && out.Kind == "bad" {
		out.Text += " The broker says: " + r.ErrMessage
	}
	return out
}

// electRefusal is a request-wide ElectLeaders error in words.
func electRefusal(err error) string {
	switch {
	case errors.Is(err, kerr.ClusterAuthorizationFailed):
		return "the brokers refused: the console's principal may not alter the cluster (CLUSTER_AUTHORIZATION_FAILED). Add it to super.users or grant it Alter on the cluster."
	case errors.Is(err, kerr.UnsupportedVersion):
		return "the brokers do not support ElectLeaders (" + err.Error() + ")."
	}
	return strings.TrimSpace(err.Error())
}
