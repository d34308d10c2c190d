#!/usr/bin/env bash
# Fetches the HSA (ROCr) headers of each ROCm generation Debian carries into a
# project-local cache, without touching the machine's apt configuration or
# dpkg state, and without root.
#
#   scripts/hsa_headers.sh fetch <suite>...   download/unpack, print include dir(s)
#   scripts/hsa_headers.sh path <suite>       print include dir if present (exit 1 if not)
#   scripts/hsa_headers.sh newest             experimental, else sid, else trixie
#   scripts/hsa_headers.sh list               what is in the cache (suite, version)
#
# Suites: bookworm (ROCm 5.2), trixie (6.1), sid/unstable (6.4), experimental (7.x).
#
# Layout (per suite):
#   $CACHE/<suite>/include/hsa/{hsa.h,hsa_ext_amd.h,hsa_api_trace.h,...}
#   $CACHE/<suite>/VERSION       "<package> <version>" per downloaded package
#   $CACHE/.apt/<suite>/...      private apt state (sources.list, lists, debs)
#
# Use the include dir as -I<dir> (for <hsa/hsa.h>) and -I<dir>/hsa (hsa_api_trace.h
# includes "hsa.h" etc. relative to itself, so -I<dir> alone also works for it).
#
# Environment:
#   HSA_HEADERS_CACHE    cache dir           (default: <project>/.cache/hsa)
#   HSA_HEADERS_MIRROR   Debian mirror URL   (default: http://deb.debian.org/debian)
#   HSA_HEADERS_MAX_AGE  seconds before the package lists are refreshed (default 86400;
#                        0 = always refresh)
#   HSA_HEADERS_PACKAGES packages to fetch   (default: libhsa-runtime-dev)
set -euo pipefail

prog=${0##*/}
die() { printf '%s: error: %s\n' "$prog" "$*" >&2; exit 1; }
note() { printf '%s: %s\n' "$prog" "$*" >&2; }

script_dir=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
project_dir=$(cd -- "$script_dir/.." && pwd)
cache=${HSA_HEADERS_CACHE:-$project_dir/.cache/hsa}
mirror=${HSA_HEADERS_MIRROR:-http://deb.debian.org/debian}
max_age=${HSA_HEADERS_MAX_AGE:-86400}
read -r -a packages <<<"${HSA_HEADERS_PACKAGES:-libhsa-runtime-dev}"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
required=(hsa/hsa.h hsa/hsa_ext_amd.h hsa/hsa_api_trace.h hsa/hsa_ven_amd_loader.h)

usage() {
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" >&2
  exit "${1:-2}"
}

# Canonical suite name (the cache dir name) and the archive's suite name.
canon_suite() {
  case $1 in
    bookworm|trixie|sid|experimental) printf '%s\n' "$1" ;;
    unstable) printf 'sid\n' ;;
    *) die "unknown suite '$1' (expected bookworm, trixie, sid, experimental)" ;;
  esac
}

need_tools() {
  local t
  for t in apt-get apt-cache dpkg-deb dpkg gpgv; do
    command -v "$t" >/dev/null || die "'$t' is required (Debian/Ubuntu host with apt)"
  done
  [[ -r $keyring ]] || die "$keyring missing (install debian-archive-keyring)"
}

# Writes a private apt configuration for one suite and prints its path.
# Dir::Etc::Parts points at an empty dir, so /etc/apt/apt.conf.d is not read;
# /etc/apt/apt.conf (Dir::Etc::Main) is pointed away too.
apt_setup() {
  local suite=$1 d=$cache/.apt/$1
  mkdir -p "$d"/{etc/apt.conf.d,etc/preferences.d,etc/sources.list.d,etc/trusted.gpg.d} \
           "$d"/lists/partial "$d"/archives/partial "$d"/cache
  : >"$d/status"
  local components=main
  printf 'deb [signed-by=%s] %s %s %s\n' "$keyring" "$mirror" "$suite" "$components" \
    >"$d/etc/sources.list"
  # Download as the invoking user: apt's default sandbox user (_apt) could not
  # write into a project directory owned by someone else.
  local user
  user=$(id -un)
  cat >"$d/apt.conf" <<EOF
Dir "/";
Dir::Etc "$d/etc/";
Dir::Etc::Main "$d/etc/apt.conf";
Dir::Etc::Parts "$d/etc/apt.conf.d/";
Dir::Etc::SourceList "$d/etc/sources.list";
Dir::Etc::SourceParts "$d/etc/sources.list.d/";
Dir::Etc::Preferences "$d/etc/preferences";
Dir::Etc::PreferencesParts "$d/etc/preferences.d/";
Dir::Etc::Trusted "$d/etc/trusted.gpg";
Dir::Etc::TrustedParts "$d/etc/trusted.gpg.d/";
Dir::State "$d/";
Dir::State::Lists "$d/lists/";
Dir::State::status "$d/status";
Dir::State::extended_states "$d/extended_states";
Dir::Cache "$d/cache/";
Dir::Cache::Archives "$d/archives/";
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
Dir::Log "$d/";
APT::Architecture "$(dpkg --print-architecture)";
APT::Architectures { "$(dpkg --print-architecture)"; };
APT::Sandbox::User "$user";
Acquire::Languages "none";
Acquire::GzipIndexes "true";
Acquire::IndexTargets::deb::Contents-deb::DefaultEnabled "false";
EOF
  : >"$d/etc/apt.conf"
  printf '%s\n' "$d/apt.conf"
}

lists_fresh() {
  local d=$cache/.apt/$1/lists stamp=$cache/.apt/$1/updated
  [[ -f $stamp ]] || return 1
  compgen -G "$d/*_Packages*" >/dev/null || return 1
  local now then
  now=$(date +%s); then=$(stat -c %Y "$stamp")
  (( max_age > 0 && now - then < max_age ))
}

apt_update() {
  local suite=$1 conf=$2 log
  if lists_fresh "$suite"; then return 0; fi
  note "updating package lists for $suite ($mirror)"
  log=$(APT_CONFIG=$conf apt-get -q update 2>&1) || true
  if grep -q 'is expired' <<<"$log"; then
    # The Release file is signed but older than its Valid-Until (stale mirror
    # or a host clock ahead of the archive). Signatures are still verified.
    note "warning: $suite Release file is past Valid-Until; retrying with Acquire::Check-Valid-Until=false"
    log=$(APT_CONFIG=$conf apt-get -q -o Acquire::Check-Valid-Until=false update 2>&1) || true
  fi
  # apt-get update exits 0 on some fetch failures; treat E:/W: lines as fatal.
  if grep -qE '^(E|W): ' <<<"$log" || ! compgen -G "$cache/.apt/$suite/lists/*_Packages*" >/dev/null; then
    printf '%s\n' "$log" >&2
    die "apt-get update reported problems for $suite"
  fi
  touch "$cache/.apt/$suite/updated"
}

# Version of a package in a suite (the only suite in the private sources.list).
pkg_version() {
  local conf=$1 pkg=$2
  APT_CONFIG=$conf apt-cache show --no-all-versions "$pkg" 2>/dev/null \
    | sed -n 's/^Version: //p' | head -n1
}

# Writes "<pkg> <version>" lines for all packages to fetch.
wanted_versions() {
  local conf=$1 suite=$2 pkg v
  for pkg in "${packages[@]}"; do
    v=$(pkg_version "$conf" "$pkg")
    [[ -n $v ]] || die "package $pkg not found in Debian $suite ($mirror, main)"
    printf '%s %s\n' "$pkg" "$v"
  done
}

check_headers() {
  local inc=$1 h missing=()
  for h in "${required[@]}"; do
    [[ -f $inc/$h ]] || missing+=("$h")
  done
  ((${#missing[@]} == 0)) || { printf '%s\n' "${missing[@]}"; return 1; }
}

fetch_one() {
  local suite conf dest want tmp pkg v deb missing
  suite=$(canon_suite "$1")
  conf=$(apt_setup "$suite")
  apt_update "$suite" "$conf"
  dest=$cache/$suite
  want=$(wanted_versions "$conf" "$suite")
  if [[ -f $dest/VERSION && $(cat "$dest/VERSION") == "$want" ]] \
     && check_headers "$dest/include" >/dev/null; then
    note "$suite: up to date ($(paste -sd" " <<<"$want"))"
    printf '%s\n' "$dest/include"
    return 0
  fi

  tmp=$(mktemp -d "$session_tmp/$suite.XXXXXX")
  mkdir -p "$tmp/root"
  while read -r pkg v; do
    note "$suite: downloading $pkg $v"
    # apt-get download writes into the current directory; name pkg=version so the
    # experimental (NotAutomatic) suite works without pinning.
    ( cd "$tmp" && APT_CONFIG=$conf apt-get -q download "$pkg=$v" >&2 ) \
      || die "apt-get download $pkg=$v failed for $suite"
    deb=$(compgen -G "$tmp/${pkg}_*.deb" | head -n1) || true
    [[ -n $deb ]] || die "downloaded .deb for $pkg not found"
    dpkg-deb -x "$deb" "$tmp/root" || die "dpkg-deb -x $deb failed"
    cp -f "$deb" "$cache/.apt/$suite/archives/"
  done <<<"$want"

  [[ -d $tmp/root/usr/include ]] || die "$suite: packages ship no /usr/include"
  if ! missing=$(check_headers "$tmp/root/usr/include"); then
    die "$suite: headers missing from ${packages[*]}: $(tr '\n' ' ' <<<"$missing")" \
        "(set HSA_HEADERS_PACKAGES to add the package that ships them)"
  fi
  rm -rf "$dest.new"
  mkdir -p "$dest.new"
  cp -a "$tmp/root/usr/include" "$dest.new/include"
  printf '%s\n' "$want" >"$dest.new/VERSION"
  rm -rf "$dest"
  mv "$dest.new" "$dest"
  note "$suite: unpacked $(paste -sd" " <<<"$want") -> $dest/include"
  printf '%s\n' "$dest/include"
}

cmd_path() {
  (($# == 1)) || usage
  local suite inc
  suite=$(canon_suite "$1")
  inc=$cache/$suite/include
  if [[ -f $cache/$suite/VERSION ]] && check_headers "$inc" >/dev/null; then
    printf '%s\n' "$inc"
  else
    note "no headers for $suite in $cache (run: $prog fetch $suite)"
    exit 1
  fi
}

cmd_newest() {
  local s out
  for s in experimental sid trixie; do
    # A child process (not a function in a subshell) so that errexit stays in
    # force inside it; its failure falls through to the next suite.
    if out=$(bash "${BASH_SOURCE[0]}" fetch "$s"); then
      printf '%s\n' "$out"
      return 0
    fi
    note "$s failed, trying the next suite"
  done
  die "could not fetch HSA headers from experimental, sid or trixie"
}

cmd_list() {
  local d
  for d in "$cache"/*/; do
    [[ -f $d/VERSION ]] || continue
    printf '%-13s %s\n' "$(basename "$d")" "$(paste -sd' ' "$d/VERSION")"
  done
}

session_tmp=""
cleanup() { [[ -z $session_tmp ]] || rm -rf "$session_tmp"; }
trap cleanup EXIT
make_session_tmp() { session_tmp=$(mktemp -d "${TMPDIR:-/tmp}/hsa_headers.XXXXXX"); }

(($# >= 1)) || usage
cmd=$1; shift
case $cmd in
  fetch)
    (($# >= 1)) || usage
    need_tools
    mkdir -p "$cache"
    make_session_tmp
    for s in "$@"; do fetch_one "$s"; done
    ;;
  path) cmd_path "$@" ;;
  newest) (($# == 0)) || usage; need_tools; mkdir -p "$cache"; cmd_newest ;;
  list) (($# == 0)) || usage; cmd_list ;;
  -h|--help|help) usage 0 ;;
  *) note "unknown command '$cmd'"; usage ;;
esac
