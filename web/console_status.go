package web

import (
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/templates"
)

// GET /console/status (admins): where this host's console stands in the
// cluster's replicated console state — per topic the applied offset, the
// end offset and the replica lag (JSON with Accept: application/json).

type consoleStatus struct{ s *Server }

func (h consoleStatus) get(c *fiber.Ctx) error {
	if h.s.cfg.ReplicaStatus == nil {
		return NotFound("replicated console state", "This console keeps its state on this host only.")
	}
	v := h.s.cfg.ReplicaStatus()
	if WantsJSON(c) {
		return c.JSON(v)
	}
	return Render(c, fiber.StatusOK, templates.ConsoleStatusPage(PageFor(c, "Console status"), v))
}

// joiningState says why a sign-in must wait, or "": while this console is
// joining the cluster's console state (its start decision not made yet
// with the topic answering, or its state being replaced by the topic's),
// the users it would check a password against are about to be replaced,
// and a session made now would end with them (consoledb ends the sessions
// of a replaced users table).
func (s *Server) joiningState() string {
	if s.cfg.ReplicaStatus == nil {
		return ""
	}
	v := s.cfg.ReplicaStatus()
	if len(v.Topics) == 0 {
		return ""
	}
	st := v.Topics[0]
	if (!st.Started && st.Err == "") || st.Rebuilding {
		return "This console is joining the cluster's console state. Sign in again in a few seconds."
	}
	return ""
}

// staleBanner is the banner every page shows while this console cannot
// reach its state topic, or "".
func (s *Server) staleBanner() string {
	v := s.cfg.ReplicaStatus()
	if len(v.Topics) == 0 {
		return ""
	}
	st := v.Topics[0]
	switch {
	case !st.Started && st.Err == "":
		return "This console has not joined the cluster's console state yet: what it shows may be stale, and changes are refused until it has."
	case !st.Reachable:
		since := ""
		if !st.Since.IsZero() {
			since = " since " + st.Since.UTC().Format(time.TimeOnly) + " UTC"
		}
		why := ""
		if st.Err != "" {
			why = " (" + st.Err + ")"
		}
		return "This console cannot reach its state topic " + st.Topic + since + why +
			": what it shows may be stale, and changes are refused until it is back."
	}
	return ""
}
