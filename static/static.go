// Package static holds the console's CSS, scripts and icons, embedded into
// the binary. Each asset is checksummed once at start: pages link to
// Path(name), which carries the checksum as a version so browsers may cache
// the file for a year, and the server answers If-None-Match with 304.
//
// htmx.min.js is htmx 2.0.11 (BSD Zero-Clause, see htmx.LICENSE.txt), taken
// unmodified from the htmx.org npm package.
package static

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"path"
	"sort"
	"strings"
)

//go:embed *.css *.js *.svg *.txt
var files embed.FS

// Asset is one embedded file, ready to serve.
type Asset struct {
	Name        string
	ContentType string
	Body        []byte
	Gzip        []byte // gzip of Body, or nil when it does not pay
	Hash        string // first 16 hex digits of the SHA-256 of Body
	ETag        string // quoted strong ETag
}

var assets = map[string]*Asset{}

func init() {
	entries, err := fs.ReadDir(files, ".")
	if err != nil {
		panic("static: " + err.Error())
	}
	for _, e := range entries {
		body, err := fs.ReadFile(files, e.Name())
		if err != nil {
			panic("static: " + err.Error())
		}
		sum := sha256.Sum256(body)
		a := &Asset{
			Name:        e.Name(),
			ContentType: contentType(e.Name()),
			Body:        body,
			Hash:        hex.EncodeToString(sum[:8]),
		}
		a.ETag = `"` + a.Hash + `"`
		if len(body) > 1024 {
			var buf bytes.Buffer
			zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
			zw.Write(body)
			zw.Close()
			if buf.Len() < len(body)*9/10 {
				a.Gzip = buf.Bytes()
			}
		}
		assets[e.Name()] = a
	}
}

func contentType(name string) string {
	switch path.Ext(name) {
	case ".css":
		return "text/css; charset=utf-8"
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	case ".txt":
		return "text/plain; charset=utf-8"
	}
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	return "application/octet-stream"
}

// Get returns the asset called name.
func Get(name string) (*Asset, bool) {
	a, ok := assets[name]
	return a, ok
}

// Names lists the embedded assets.
func Names() []string {
	out := make([]string, 0, len(assets))
	for n := range assets {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Prefix is the URL path under which assets are served.
const Prefix = "/static/"

// Path is the URL of asset name, versioned by its checksum. It panics for an
// unknown name so a typo fails the first test that renders the page.
func Path(name string) string {
	a, ok := assets[strings.TrimPrefix(name, "/")]
	if !ok {
		panic("static: no asset " + name)
	}
	return Prefix + a.Name + "?v=" + a.Hash
}
