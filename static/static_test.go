package static

import (
	"bytes"
	"compress/gzip"
	"io"
	"strings"
	"testing"
)

func TestAssetsAreChecksummedAndCompressed(t *testing.T) {
	for _, name := range []string{"app.css", "app.js", "comparisons.css", "htmx.min.js", "favicon.svg", "htmx.LICENSE.txt"} {
		a, ok := Get(name)
		if !ok || len(a.Body) == 0 || len(a.Hash) != 16 || a.ETag != `"`+a.Hash+`"` || a.ContentType == "" {
			t.Fatalf("asset %s: %+v", name, a)
		}
		if !strings.HasSuffix(Path(name), "?v="+a.Hash) {
			t.Fatalf("Path(%s) = %s", name, Path(name))
		}
		if a.Gzip != nil {
			zr, err := gzip.NewReader(bytes.NewReader(a.Gzip))
			if err != nil {
				t.Fatal(err)
			}
			plain, _ := io.ReadAll(zr)
			if !bytes.Equal(plain, a.Body) {
				t.Fatalf("gzip of %s differs", name)
			}
		}
	}
	if a, _ := Get("htmx.min.js"); a.Gzip == nil {
		t.Fatal("htmx.min.js is not precompressed")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Path of a missing asset did not panic")
		}
	}()
	Path("missing.css")
}
