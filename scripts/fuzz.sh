#!/usr/bin/env bash
# Runs every native Go fuzz target in the repository for a short time each.
# Usage: scripts/fuzz.sh [fuzztime]   (default 4s)
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${1:-4s}
status=0
while IFS= read -r line; do
	file=${line%%:*}
	name=$(sed -E 's/^.*func (Fuzz[A-Za-z0-9_]*).*/\1/' <<<"$line")
	pkg=./$(dirname "$file")
	echo "fuzz $pkg $name ($fuzztime)"
	if ! go test -run='^$' -fuzz="^${name}\$" -fuzztime="$fuzztime" "$pkg" >/tmp/sluice-fuzz.$$ 2>&1; then
		cat /tmp/sluice-fuzz.$$; status=1
	fi
done < <(grep -rn --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]*\(' . | grep -v '/data/' || true)
rm -f /tmp/sluice-fuzz.$$
exit $status
