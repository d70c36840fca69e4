#!/usr/bin/env bash
# install.sh: install Sluice on one Linux host, from a built package (.deb or
# .rpm) or a bare binary, write its configuration from flags, start the
# service and say where the console is. Running it again with the same flags
# changes nothing.
#
#   sudo ./install.sh                                  # newest package in ./dist, else ./bin/sluice
#   sudo ./install.sh --package dist/sluice_0.1.0-1_amd64.deb --broker-id 1 \
#        --zookeeper zk1:2181,zk2:2181,zk3:2181/sluice --listen :9092
#   sudo ./install.sh --with-zookeeper                 # also Debian's ZooKeeper on this host
#   sudo ./install.sh --uninstall [--purge]            # keep, or also delete, config and data
#   ./install.sh --root /tmp/r --binary bin/sluice     # into a directory tree (tests)
#   ./install.sh --dry-run ...                         # print what would change
set -euo pipefail

usage() {
	cat <<'EOF'
Usage: install.sh [options]

Source (default: the newest package in ./dist for this OS and architecture,
else ./bin/sluice):
  --package FILE        install this .deb or .rpm
  --binary FILE         install this binary with the same layout as the package

Configuration (written to /etc/sluice/server.properties; other keys untouched):
  --broker-id N         broker.id (each broker of a cluster needs its own)
  --zookeeper CONNECT   zookeeper.connect, e.g. zk1:2181,zk2:2181/sluice
  --listen HOST:PORT    the Kafka listener (listeners=PLAINTEXT://HOST:PORT)
  --advertise HOST:PORT what clients are told to connect to (advertised.listeners)
  --console-listen ADDR console.listen (default :8080; empty disables the console)
  --with-zookeeper      install Debian's ZooKeeper (zookeeperd) on this host and,
                        without --zookeeper, use it (localhost:2181)

Service:
  --no-start            do not start or restart the service

Removal:
  --uninstall           remove Sluice; keep /etc/sluice and /var/lib/sluice
  --purge               with --uninstall: delete the configuration and all data

Testing:
  --root DIR            install into DIR instead of / (binary layout; no users,
                        no systemd, no package manager)
  --dry-run             print what would change and change nothing
  -h, --help            this help
EOF
}

die() {
	echo "install.sh: $*" >&2
	exit 1
}
usage_error() {
	echo "install.sh: $*" >&2
	echo "Run './install.sh --help' for usage." >&2
	exit 2
}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

package="" binary="" broker_id="" zookeeper="" listen="" advertise=""
console_listen="" console_listen_set=0 with_zookeeper=0 no_start=0
uninstall=0 purge=0 root="" dry_run=0
need_value() { [ $# -ge 2 ] || usage_error "$1 needs a value"; }
while [ $# -gt 0 ]; do
	opt=$1
	case $opt in
	--*=*) set -- "${opt%%=*}" "${opt#*=}" "${@:2}"; continue ;;
	esac
	case $opt in
	--package) need_value "$@"; package=$2; shift ;;
	--binary) need_value "$@"; binary=$2; shift ;;
	--broker-id) need_value "$@"; broker_id=$2; shift ;;
	--zookeeper) need_value "$@"; zookeeper=$2; shift ;;
	--listen) need_value "$@"; listen=$2; shift ;;
	--advertise) need_value "$@"; advertise=$2; shift ;;
	--console-listen) need_value "$@"; console_listen=$2; console_listen_set=1; shift ;;
	--with-zookeeper) with_zookeeper=1 ;;
	--no-start) no_start=1 ;;
	--uninstall) uninstall=1 ;;
	--purge) purge=1 ;;
	--root) need_value "$@"; root=$2; shift ;;
	--dry-run) dry_run=1 ;;
	-h | --help) usage; exit 0 ;;
	*) usage_error "unknown option $opt" ;;
	esac
	shift
done

# ---- validation of the command line -----------------------------------------

[ -n "$package" ] && [ -n "$binary" ] && usage_error "give --package or --binary, not both"
[ "$purge" = 1 ] && [ "$uninstall" = 0 ] && usage_error "--purge goes with --uninstall"
if [ -n "$broker_id" ] && ! [[ $broker_id =~ ^[0-9]+$ ]]; then
	usage_error "--broker-id must be a number >= 0, not '$broker_id'"
fi
hostport_re='^([A-Za-z0-9._-]*|\[[0-9A-Fa-f:.]+\]):[0-9]{1,5}$'
for pair in "listen:$listen" "advertise:$advertise"; do
	name=${pair%%:*} value=${pair#*:}
	if [ -n "$value" ] && ! [[ $value =~ $hostport_re ]]; then
		usage_error "--$name must be HOST:PORT (HOST may be empty), not '$value'"
	fi
done
if [ "$console_listen_set" = 1 ] && [ -n "$console_listen" ] && ! [[ $console_listen =~ $hostport_re ]]; then
	usage_error "--console-listen must be HOST:PORT or empty, not '$console_listen'"
fi
zk_re='^[][A-Za-z0-9._:,-]+(/[A-Za-z0-9._/-]*)?$'
if [ -n "$zookeeper" ] && ! [[ $zookeeper =~ $zk_re ]]; then
	usage_error "--zookeeper must be host:port[,host:port...][/chroot], not '$zookeeper'"
fi
if [ -n "$root" ]; then
	[ -d "$root" ] || die "--root $root is not a directory"
	root=$(cd "$root" && pwd)
	[ "$root" = / ] && root=""
fi
[ -n "$root" ] && [ "$with_zookeeper" = 1 ] && usage_error "--with-zookeeper cannot install into --root"

# ---- the host -----------------------------------------------------------------

[ "$(uname -s)" = Linux ] || die "Sluice installs on Linux only (this is $(uname -s))"
case $(uname -m) in
x86_64 | amd64) goarch=amd64 rpmarch=x86_64 ;;
aarch64 | arm64) goarch=arm64 rpmarch=aarch64 ;;
*) die "unsupported architecture $(uname -m): Sluice is built for x86_64 and aarch64" ;;
esac

os_id="" os_like="" family=""
if [ -r /etc/os-release ]; then
	# shellcheck disable=SC1091
	os_id=$(. /etc/os-release && echo "${ID:-}")
	# shellcheck disable=SC1091
	os_like=$(. /etc/os-release && echo "${ID_LIKE:-}")
fi
case " $os_id $os_like " in
*" debian "* | *" ubuntu "*) family=deb ;;
*" rhel "* | *" fedora "* | *" centos "* | *" rocky "* | *" almalinux "* | *" ol "*) family=rpm ;;
esac

if [ "$(id -u)" != 0 ] && [ -z "$root" ] && [ "$dry_run" = 0 ]; then
	die "must be run as root to install system-wide (try: sudo $0 $*), or use --dry-run"
fi

systemd_running=0
[ -z "$root" ] && [ -d /run/systemd/system ] && systemd_running=1

changes=0
say() { echo "$*"; }
changed() {
	changes=$((changes + 1))
	if [ "$dry_run" = 1 ]; then say "would: $*"; else say "done: $*"; fi
}
# run prints a command and, unless --dry-run, runs it.
run() {
	if [ "$dry_run" = 1 ]; then
		say "would run: $*"
	else
		say "+ $*"
		"$@"
	fi
}

CONFIG=$root/etc/sluice/server.properties
DATA=$root/var/lib/sluice

# ---- files --------------------------------------------------------------------

# put_file SRC DST MODE [OWNER:GROUP]: install SRC as DST when the content or
# mode differs.
# Sets put_changed to 1 when it (would have) changed DST.
put_changed=0
put_file() {
	local src=$1 dst=$2 mode=$3 owner=${4:-}
	put_changed=0
	if [ -f "$dst" ] && cmp -s "$src" "$dst" && [ "$(stat -c %a "$dst")" = "${mode#0}" ]; then
		return 0
	fi
	put_changed=1
	changed "install $dst"
	[ "$dry_run" = 1 ] && return 0
	install -d -m 0755 "$(dirname "$dst")"
	install -m "$mode" "$src" "$dst.install-tmp"
	if [ -n "$owner" ] && [ -z "$root" ]; then chown "$owner" "$dst.install-tmp"; fi
	mv -f "$dst.install-tmp" "$dst"
}

# put_dir DIR MODE [OWNER:GROUP]: create DIR when missing; never touches an
# existing one.
put_dir() {
	local dir=$1 mode=$2 owner=${3:-}
	[ -d "$dir" ] && return 0
	changed "create $dir"
	[ "$dry_run" = 1 ] && return 0
	install -d -m "$mode" "$dir"
	if [ -n "$owner" ] && [ -z "$root" ]; then chown "$owner" "$dir"; fi
}

# planned holds what set_key wrote, or would have written with --dry-run.
declare -A planned=()

# set_key KEY VALUE: make the active line of KEY in the configuration read
# KEY=VALUE: replace an active line, or add one below the commented default,
# or append. Nothing is written when it already says so.
set_key() {
	local key=$1 value=$2 tmp
	planned[$key]=$value
	[ -f "$CONFIG" ] || { changed "set $key=$value in $CONFIG"; return 0; }
	tmp=$(mktemp)
	awk -v key="$key" -v value="$value" '
		function is_key(line, prefix) { return index(line, prefix key "=") == 1 }
		{ lines[NR] = $0 }
		is_key($0, "") && !active { active = NR }
		is_key($0, "#") && !commented { commented = NR }
		END {
			for (i = 1; i <= NR; i++) {
				if (i == active) { print key "=" value; continue }
				print lines[i]
				if (!active && i == commented) print key "=" value
			}
			if (!active && !commented) print key "=" value
		}' "$CONFIG" >"$tmp"
	if cmp -s "$tmp" "$CONFIG"; then
		rm -f "$tmp"
		return 0
	fi
	changed "set $key=$value in $CONFIG"
	if [ "$dry_run" = 1 ]; then
		rm -f "$tmp"
		return 0
	fi
	cat "$tmp" >"$CONFIG" # keeps the file's owner and mode
	rm -f "$tmp"
	config_changed=1
}

# get_key KEY DEFAULT: the active value of KEY in the configuration as this
# run leaves it: what set_key set (a dry run changes no file), else the
# file's, else (a dry run before the file exists) the file to be installed.
get_key() {
	local v file=$CONFIG
	if [ -n "${planned[$1]+set}" ]; then
		echo "${planned[$1]}"
		return 0
	fi
	[ -f "$file" ] || file=$here/packaging/server.properties
	v=$(sed -n "s/^${1//./\\.}=//p" "$file" 2>/dev/null | tail -n 1) || true
	if [ -n "$v" ] || grep -q "^$1=" "$file" 2>/dev/null; then echo "$v"; else echo "$2"; fi
}

# ---- uninstall ----------------------------------------------------------------

if [ "$uninstall" = 1 ]; then
	installed_pkg=""
	if [ -z "$root" ]; then
		deb_status=$(dpkg-query -W -f='${Status}' sluice 2>/dev/null || true)
		if [ "$deb_status" = "install ok installed" ]; then
			installed_pkg=deb
		elif [ "$purge" = 1 ] && [ "$deb_status" = "deinstall ok config-files" ]; then
			installed_pkg=deb # removed earlier; purge what dpkg still keeps
		elif command -v rpm >/dev/null && rpm -q sluice >/dev/null 2>&1; then
			installed_pkg=rpm
		fi
	fi
	case $installed_pkg in
	deb)
		changed "remove the sluice package"
		if [ "$purge" = 1 ]; then run apt-get purge -y sluice; else run apt-get remove -y sluice; fi
		;;
	rpm)
		changed "remove the sluice package"
		if command -v dnf >/dev/null; then run dnf remove -y sluice; else run yum remove -y sluice; fi
		;;
	*)
		if [ "$systemd_running" = 1 ] && systemctl is-enabled --quiet sluice.service 2>/dev/null; then
			changed "stop and disable sluice.service"
			run systemctl disable --now sluice.service
		fi
		for f in "$root/usr/bin/sluice" "$root/etc/systemd/system/sluice.service"; do
			if [ -e "$f" ]; then
				changed "remove $f"
				[ "$dry_run" = 1 ] || rm -f "$f"
			fi
		done
		if [ -L "$root/etc/systemd/system/multi-user.target.wants/sluice.service" ]; then
			changed "remove the boot-time link of sluice.service"
			[ "$dry_run" = 1 ] || rm -f "$root/etc/systemd/system/multi-user.target.wants/sluice.service"
		fi
		[ "$systemd_running" = 1 ] && run systemctl daemon-reload
		;;
	esac
	if [ "$purge" = 1 ]; then
		for d in "$DATA" "$root/etc/sluice"; do
			if [ -e "$d" ]; then
				changed "delete $d"
				[ "$dry_run" = 1 ] || rm -rf "$d"
			fi
		done
	elif [ -d "$DATA" ] || [ -d "$root/etc/sluice" ]; then
		say "kept: $root/etc/sluice and $DATA (delete them with --uninstall --purge)"
	fi
	say "$changes change(s)"
	exit 0
fi

# ---- choose what to install ---------------------------------------------------

# newest_package PATTERN: the newest package in ./dist named PATTERN, or
# nothing when there is no ./dist (after 'make build' or 'make run') or no
# such package.
newest_package() {
	[ -d "$here/dist" ] || return 0
	find "$here/dist" -maxdepth 1 -name "$1" | sort -V | tail -n 1
}

if [ -z "$package" ] && [ -z "$binary" ]; then
	if [ -z "$root" ] && [ "$family" = deb ]; then
		package=$(newest_package "sluice_*_$goarch.deb") || die "cannot list the packages in $here/dist"
	elif [ -z "$root" ] && [ "$family" = rpm ]; then
		package=$(newest_package "sluice-*.$rpmarch.rpm") || die "cannot list the packages in $here/dist"
	fi
	if [ -z "$package" ]; then
		binary=$here/bin/sluice
		[ -x "$binary" ] || die "no package in $here/dist for this host and no $binary: run 'make package' (or 'make build'), or pass --package or --binary"
	fi
fi

if [ -n "$package" ]; then
	[ -f "$package" ] || die "no such package: $package"
	[ -z "$root" ] || die "--root installs a binary (--binary), not a package"
	case $package in
	*.deb)
		[ "$family" = deb ] || die "$package is a .deb but this host is not Debian or Ubuntu (ID=$os_id)"
		pkg_arch=$(dpkg-deb -f "$package" Architecture)
		[ "$pkg_arch" = "$goarch" ] || [ "$pkg_arch" = all ] || die "$package is built for $pkg_arch, this host is $goarch"
		pkg_version=$(dpkg-deb -f "$package" Version)
		;;
	*.rpm)
		[ "$family" = rpm ] || die "$package is an .rpm but this host is not RHEL, Fedora or a relative (ID=$os_id)"
		pkg_arch=$(rpm -qp --qf '%{ARCH}' "$package" 2>/dev/null)
		[ "$pkg_arch" = "$rpmarch" ] || [ "$pkg_arch" = noarch ] || die "$package is built for $pkg_arch, this host is $rpmarch"
		pkg_version=$(rpm -qp --qf '%{VERSION}-%{RELEASE}' "$package" 2>/dev/null)
		;;
	*) die "$package is neither a .deb nor an .rpm" ;;
	esac
else
	if [ ! -f "$binary" ] || [ ! -x "$binary" ]; then die "$binary is not an executable file"; fi
	# Running it proves it is built for this architecture.
	"$binary" version >/dev/null 2>&1 || die "$binary does not run here (built for another architecture?)"
	if [ ! -f "$here/packaging/server.properties" ] || [ ! -f "$here/systemd/sluice.service" ]; then
		die "--binary installs need packaging/server.properties and systemd/sluice.service beside install.sh"
	fi
	if [ -z "$family" ] && [ -z "$root" ]; then
		say "note: unknown distribution (ID=$os_id); installing the binary layout"
	fi
fi

if [ -n "$package" ]; then say "source: $package"; else say "source: $binary"; fi

# ---- ZooKeeper ----------------------------------------------------------------

if [ "$with_zookeeper" = 1 ]; then
	[ "$family" = deb ] || die "--with-zookeeper uses Debian's zookeeperd package; on this OS run a ZooKeeper ensemble yourself and pass --zookeeper host:port"
	if ! dpkg-query -W -f='${Status}' zookeeperd 2>/dev/null | grep -q 'install ok installed'; then
		changed "install Debian's ZooKeeper (zookeeperd)"
		run env DEBIAN_FRONTEND=noninteractive apt-get install -y -q zookeeperd
	fi
	[ -n "$zookeeper" ] || zookeeper=localhost:2181
fi

# ---- install --------------------------------------------------------------------

config_changed=0
binary_changed=0
if [ -n "$package" ]; then
	case $package in
	*.deb) current=$( (dpkg-query -W -f='${Status} ${Version}' sluice 2>/dev/null || true) | sed -n 's/^install ok installed //p') ;;
	*.rpm) current=$(rpm -q --qf '%{VERSION}-%{RELEASE}' sluice 2>/dev/null || true) ;;
	esac
	if [ "$current" != "$pkg_version" ]; then
		changed "install the sluice package $pkg_version${current:+ (replacing $current)}"
		binary_changed=1
		case $package in
		# SLUICE_NO_START: the package's scripts do not start the service;
		# it starts below, once the configuration is written (a broker that
		# first started alone cannot join a ZooKeeper cluster later).
		*.deb) run env DEBIAN_FRONTEND=noninteractive SLUICE_NO_START=1 apt-get install -y -q "$(cd "$(dirname "$package")" && pwd)/$(basename "$package")" ;;
		*.rpm) if command -v dnf >/dev/null; then run env SLUICE_NO_START=1 dnf install -y "$package"; else run env SLUICE_NO_START=1 yum install -y "$package"; fi ;;
		esac
	fi
else
	if [ -z "$root" ] && ! getent passwd sluice >/dev/null; then
		changed "create the system user sluice"
		if [ "$dry_run" = 0 ]; then
			getent group sluice >/dev/null || groupadd --system sluice
			useradd --system --gid sluice --home-dir /var/lib/sluice --no-create-home \
				--shell "$(command -v nologin || echo /sbin/nologin)" --comment "Sluice messaging appliance" sluice
		fi
	fi
	put_file "$binary" "$root/usr/bin/sluice" 0755
	binary_changed=$put_changed
	put_file "$here/systemd/sluice.service" "$root/etc/systemd/system/sluice.service" 0644
	unit_changed=$put_changed
	put_dir "$root/etc/sluice" 0755
	if [ ! -f "$CONFIG" ]; then
		put_file "$here/packaging/server.properties" "$CONFIG" 0640 root:sluice
		config_changed=1
	fi
	put_dir "$DATA" 0750 sluice:sluice
	put_dir "$DATA/kafka" 0750 sluice:sluice
	put_dir "$DATA/console" 0750 sluice:sluice
	if [ -z "$root" ] && [ "$dry_run" = 0 ] && command -v systemctl >/dev/null; then
		[ "$unit_changed" = 1 ] && [ "$systemd_running" = 1 ] && systemctl daemon-reload
		if ! systemctl is-enabled --quiet sluice.service 2>/dev/null; then
			changed "enable sluice.service at boot"
			systemctl enable sluice.service >/dev/null 2>&1 || say "note: could not enable sluice.service"
		fi
	elif [ -n "$root" ]; then
		link=$root/etc/systemd/system/multi-user.target.wants/sluice.service
		if [ ! -L "$link" ]; then
			changed "enable sluice.service at boot ($link)"
			[ "$dry_run" = 1 ] || { mkdir -p "$(dirname "$link")" && ln -s /etc/systemd/system/sluice.service "$link"; }
		fi
	fi
fi

# ---- configuration --------------------------------------------------------------

[ -n "$broker_id" ] && set_key broker.id "$broker_id"
[ -n "$zookeeper" ] && set_key zookeeper.connect "$zookeeper"
[ -n "$listen" ] && set_key listeners "PLAINTEXT://$listen"
[ -n "$advertise" ] && set_key advertised.listeners "PLAINTEXT://$advertise"
[ "$console_listen_set" = 1 ] && set_key console.listen "$console_listen"

# ---- start ----------------------------------------------------------------------

if [ -n "$root" ]; then
	say "installed into $root (no service started)"
elif [ "$no_start" = 1 ]; then
	say "not starting the service (--no-start)"
elif [ "$systemd_running" = 0 ]; then
	say "systemd is not running here; start Sluice by hand with:"
	say "  sudo -u sluice /usr/bin/sluice serve --config /etc/sluice/server.properties"
elif [ "$dry_run" = 0 ]; then
	# The package's scripts were told not to (re)start it: a new binary or
	# configuration needs a restart here.
	if ! systemctl is-active --quiet sluice.service; then
		changed "start sluice.service"
		systemctl start sluice.service || die "sluice.service did not start; see: journalctl -u sluice -n 50"
	elif [ "$config_changed" = 1 ] || [ "$binary_changed" = 1 ]; then
		changed "restart sluice.service"
		systemctl restart sluice.service || die "sluice.service did not restart; see: journalctl -u sluice -n 50"
	fi
fi

# ---- where to go next -------------------------------------------------------------

console=$(get_key console.listen :8080)
if [ -n "$console" ]; then
	chost=${console%:*} cport=${console##*:}
	case $chost in
	"" | 0.0.0.0 | "[::]") chost=$(hostname -f 2>/dev/null || hostname) ;;
	esac
	scheme=http
	[ -n "$(get_key console.tls.cert "")" ] && scheme=https
	say ""
	say "Console:  $scheme://$chost:$cport/"
	say "Create the first console administrator (it asks for a password):"
	say "  sudo -u sluice sluice console user add --config /etc/sluice/server.properties --role admin admin"
	say "or open the one-time setup link the service logs at start:"
	say "  journalctl -u sluice | grep setup?token="
fi
say "Kafka:    $(get_key advertised.listeners "")$([ -z "$(get_key advertised.listeners "")" ] && get_key listeners PLAINTEXT://:9092)"
say "Service:  systemctl status sluice; logs: journalctl -u sluice"
say "$changes change(s)"
