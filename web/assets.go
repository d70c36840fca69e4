package web

import (
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/sluice-io/sluice/static"
)

// serveAsset serves an embedded file from package static. Pages link to
// static.Path(name), which carries the content checksum as ?v=, so those
// URLs are cached for a year; any URL is answered 304 when the browser's
// ETag (the checksum) still matches.
func serveAsset(c *fiber.Ctx) error {
	a, ok := static.Get(c.Params("name"))
	if !ok {
		return fiber.ErrNotFound
	}
	c.Set(fiber.HeaderETag, a.ETag)
	c.Set(fiber.HeaderContentType, a.ContentType)
	c.Set("X-Content-Type-Options", "nosniff")
	if c.Query("v") == a.Hash {
		c.Set(fiber.HeaderCacheControl, "public, max-age=31536000, immutable")
	} else {
		c.Set(fiber.HeaderCacheControl, "public, max-age=300")
	}
	c.Set(fiber.HeaderVary, fiber.HeaderAcceptEncoding)
	if match := c.Get(fiber.HeaderIfNoneMatch); match != "" && etagMatches(match, a.ETag) {
		return c.SendStatus(fiber.StatusNotModified)
	}
	if a.Gzip != nil && strings.Contains(c.Get(fiber.HeaderAcceptEncoding), "gzip") {
		c.Set(fiber.HeaderContentEncoding, "gzip")
		return c.Send(a.Gzip)
	}
	return c.Send(a.Body)
}

func etagMatches(header, etag string) bool {
	for _, part := range strings.Split(header, ",") {
		part = strings.TrimSpace(part)
		part = strings.TrimPrefix(part, "W/")
		if part == etag || part == "*" {
			return true
		}
	}
	return false
}
