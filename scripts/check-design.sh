#!/usr/bin/env bash
# check-design.sh: DESIGN.md's package map and dependency arrows against the code.
#
# The map (between the "package map" markers) names every package of the module,
# one "path/" entry per line; an entry that is not a package must be a directory
# of the repository (systemd/, bench/, ...). The arrows (between the
# "dependencies" markers) are lines "from -> to", each followed by an indented
# line saying why the dependency exists. They must be exactly the imports among
# the module's packages that `go list` reports (test files not counted):
# no arrow that is not an import, no import without an arrow.
#
# Run from anywhere inside the repository; GO names the go command (default go).
# Exits 1 and prints the differences when DESIGN.md and the code disagree.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
design=DESIGN.md
module=$("$GO" list -m)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$GO" list -f '{{.ImportPath}}: {{join .Imports " "}}' ./... >"$tmp/list"
awk -v m="$module" '{
	p = $1; sub(/:$/, "", p); sub("^" m "/?", "", p); if (p == "") p = "."
	print p > "'"$tmp/pkgs"'"
	for (i = 2; i <= NF; i++) if (index($i, m "/") == 1) print p " -> " substr($i, length(m) + 2)
}' "$tmp/list" | sort -u >"$tmp/imports"
sort -u -o "$tmp/pkgs" "$tmp/pkgs"

# between <!-- NAME: begin --> and <!-- NAME: end -->
section() {
	awk -v b="<!-- $1: begin -->" -v e="<!-- $1: end -->" '
		$0 == e { on = 0 } on { print } $0 == b { on = 1; seen = 1 }
		END { if (!seen) exit 1 }' "$design"
}

fail=0
if ! section "dependencies" >"$tmp/deps"; then
	echo "$design: no <!-- dependencies: begin --> section"; exit 1
fi
if ! section "package map" >"$tmp/map"; then
	echo "$design: no <!-- package map: begin --> section"; exit 1
fi

# Arrows, and the reason under each.
awk '
	/^[^ ]+ -> [^ ]+$/ { if (want) { print "no reason under " want > "/dev/stderr"; bad = 1 }
	                     print; want = $0; next }
	want { if ($0 ~ /^[ \t]+[^ \t]/) want = ""; else { print "no reason under " want > "/dev/stderr"; bad = 1; want = "" } }
	/->/ && !/^[ \t]/ { print "not an arrow (want \"from -> to\"): " $0 > "/dev/stderr"; bad = 1 }
	END { if (want) { print "no reason under " want > "/dev/stderr"; bad = 1 } exit bad }
' "$tmp/deps" >"$tmp/arrows.raw" || fail=1
sort "$tmp/arrows.raw" | uniq -d | sed 's/^/arrow drawn twice: /' | grep . && fail=1
sort -u "$tmp/arrows.raw" >"$tmp/arrows"

comm -13 "$tmp/arrows" "$tmp/imports" | sed 's/^/import without an arrow in DESIGN.md: /' | grep . && fail=1
comm -23 "$tmp/arrows" "$tmp/imports" | sed 's/^/arrow in DESIGN.md that is not an import: /' | grep . && fail=1

# The map: every package has an entry; every entry is a package or a directory.
sed -n 's#^\([A-Za-z0-9_.][A-Za-z0-9_./-]*\)/\( .*\)\{0,1\}$#\1#p' "$tmp/map" | sort -u >"$tmp/entries"
comm -13 "$tmp/entries" "$tmp/pkgs" | sed 's/^/package missing from the map in DESIGN.md: /' | grep . && fail=1
while read -r e; do
	[ -d "$e" ] || { echo "map entry in DESIGN.md is no directory of the repository: $e/"; fail=1; }
done < <(comm -23 "$tmp/entries" "$tmp/pkgs")

if [ "$fail" != 0 ]; then
	echo "DESIGN.md disagrees with the code: fix the map or the arrows (see scripts/check-design.sh)"
	exit 1
fi
echo "DESIGN.md: $(wc -l <"$tmp/pkgs") packages, $(wc -l <"$tmp/imports") arrows, as go list reports"
