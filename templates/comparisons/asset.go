package comparisons

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
)

// CSS is the pages' stylesheet; the handlers serve it at AssetPath.
//
//go:embed comparisons.css
var CSS []byte

// CSSHash is the first 16 hex digits of the SHA-256 of CSS.
var CSSHash = func() string {
	sum := sha256.Sum256(CSS)
	return hex.EncodeToString(sum[:8])
}()

// AssetPath is where the stylesheet is served; the hash in the name lets
// browsers keep it for good.
var AssetPath = "/comparisons/assets/comparisons." + CSSHash + ".css"
