package web

import (
	"net/url"
	"strings"
	"sync"
	"time"
	_ "time/tzdata" // zones for viewers on hosts without /usr/share/zoneinfo

	"github.com/gofiber/fiber/v2"
)

// Times are shown in the viewer's zone. app.js stores the browser's IANA
// zone name in the tz cookie; without it (first visit, scripts off) times
// are shown in UTC and labelled so.

var zoneCache sync.Map // name -> *time.Location

func viewerLocation(c *fiber.Ctx) *time.Location {
	name, err := url.QueryUnescape(c.Cookies(tzCookie)) // app.js encodes the "/"
	if err != nil {
		return time.UTC
	}
	if !validZoneName(name) {
		return time.UTC
	}
	if l, ok := zoneCache.Load(name); ok {
		return l.(*time.Location)
	}
	loc, err := time.LoadLocation(name)
	if err != nil || name == "Local" {
		return time.UTC
	}
	zoneCache.Store(strings.Clone(name), loc)
	return loc
}

// Location is the viewer's time zone for this request.
func Location(c *fiber.Ctx) *time.Location {
	if l, ok := c.Locals(localsLoc).(*time.Location); ok && l != nil {
		return l
	}
	return time.UTC
}

func validZoneName(name string) bool {
	if name == "" || len(name) > 64 || strings.Contains(name, "..") {
		return false
	}
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '/', r == '_', r == '-', r == '+':
		default:
			return false
		}
	}
	return true
}
