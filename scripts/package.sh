#!/usr/bin/env bash
# Builds the sluice .deb and .rpm with nfpm (pinned in go.mod: `go tool nfpm`)
# from packaging/nfpm.yaml. `make package` runs it after `make build`.
#
# Usage: scripts/package.sh [VERSION]
#   VERSION defaults to the exact git tag of HEAD (vX.Y.Z), else the VERSION file.
# Environment:
#   SLUICE_BIN        binary to package (default bin/sluice)
#   SLUICE_DIST       output directory (default dist)
#   SLUICE_ARCH       GOARCH of the binary (default: go env GOARCH)
#   SLUICE_FORMATS    formats to build (default "deb rpm")
#   SLUICE_MAINTAINER Name <email> of the packager
#   SOURCE_DATE_EPOCH file times in the packages (default: the last commit's time)
# Prints the path of each package built.
set -euo pipefail
trap 'echo "package.sh: failed at line $LINENO: $BASH_COMMAND" >&2' ERR
cd "$(dirname "$0")/.."

die() { echo "package.sh: $*" >&2; exit 1; }

version=${1:-}
if [ -z "$version" ]; then
	version=$(git describe --tags --exact-match 2>/dev/null || cat VERSION 2>/dev/null || true)
fi
version=${version#v}
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.+-]+)?$ ]] ||
	die "version '$version' is not X.Y.Z[-prerelease]"

bin=${SLUICE_BIN:-bin/sluice}
[ -x "$bin" ] || die "$bin is missing or not executable (run 'make build' first)"
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
dist=${SLUICE_DIST:-dist}
arch=${SLUICE_ARCH:-$(go env GOARCH)}
formats=${SLUICE_FORMATS:-deb rpm}
maintainer=${SLUICE_MAINTAINER:-Sluice Maintainers <maintainers@sluice-io.github.io>}
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
	SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null || date +%s)
fi
export SOURCE_DATE_EPOCH
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

# Debian's version of X.Y.Z-rc1 is X.Y.Z~rc1 (sorts before X.Y.Z), as nfpm
# writes it; the changelog entry must carry the same, with release 1.
debversion=${version/-/\~}-1
{
	printf 'sluice (%s) unstable; urgency=medium\n\n' "$debversion"
	printf '  * Sluice %s (commit %s).\n\n' "$version" "$commit"
	printf ' -- %s  %s\n' "$maintainer" "$(date -u -R -d "@$SOURCE_DATE_EPOCH")"
} | gzip -9n >"$stage/changelog.Debian.gz"
gzip -9n <packaging/sluice.1 >"$stage/sluice.1.gz"
touch -d "@$SOURCE_DATE_EPOCH" "$stage"/*

mkdir -p "$dist"
export SLUICE_VERSION=$version SLUICE_ARCH=$arch SLUICE_BIN=$bin SLUICE_STAGE=$stage SLUICE_MAINTAINER=$maintainer
for format in $formats; do
	out=$(go tool nfpm package --config packaging/nfpm.yaml --packager "$format" --target "$dist/" 2>&1) ||
		die "nfpm $format failed: $out"
	path=$(sed -n 's/^created package: //p' <<<"$out")
	[ -n "$path" ] || die "nfpm $format printed no package: $out"
	echo "$path"
done
