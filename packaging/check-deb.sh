#!/usr/bin/env bash
# Installs the Debian package `make deb` built and checks it as an operator
# would meet it, then removes and purges it:
# - `dpkg -i`; `hetsched --version`, `pkg-config --modversion hetsched`,
#   the C library's hs_version() and the package all name one version;
# - the installed units pass `systemd-analyze verify` and are enabled;
# - a C program builds against the installed hetsched.pc and runs;
# - `dpkg -r` leaves none of the package's files but its conffile,
#   `dpkg --purge` removes that too, and the units' enablement.
# Needs root and a machine where hetsched is not installed as a package.
# Usage: packaging/check-deb.sh [PACKAGE.deb]
set -euo pipefail
cd "$(dirname "$0")/.."
fail() { echo "deb check: $*" >&2; exit 1; }

deb=${1:-$(ls -t target/debian/hetsched_*.deb 2>/dev/null | head -n 1)}
[ -n "$deb" ] && [ -f "$deb" ] || fail "no package: run make deb first"
[ "$(id -u)" = 0 ] || fail "dpkg -i needs root"
if dpkg-query -W -f '${Status}' hetsched 2>/dev/null | grep -q 'installed\|config-files'; then
    fail "hetsched is already installed as a package here; this check would remove it"
fi
conffile=/etc/hetsched/hetsched.toml
[ ! -e "$conffile" ] || fail "$conffile exists already; this check would take it over"

stage=$(mktemp -d -t hetsched-deb-XXXXXX)
cleanup() {
    dpkg --purge hetsched >/dev/null 2>&1 || true
    rm -rf "$stage"
}
trap cleanup EXIT

dpkg -i "$deb" >/dev/null || fail "dpkg -i $deb failed"
dpkg-query -L hetsched > "$stage/files"

# One version everywhere.
package_version=$(dpkg-query -W -f '${Version}' hetsched)
version=${package_version%-*}
line=$(hetsched --version) || fail "the installed hetsched does not run"
case "$line" in
    "hetsched $version" | "hetsched $version (commit "*")") ;;
    *) fail "hetsched --version says '$line', the package is $package_version" ;;
esac
[ "$(command -v hetsched)" = /usr/bin/hetsched ] || fail "hetsched is not /usr/bin/hetsched"
[ "$(pkg-config --modversion hetsched)" = "$version" ] || fail "hetsched.pc's version is not $version"

for f in /usr/lib/libhetsched.so /usr/lib/libhetsched.a /usr/include/hetsched.h \
         /usr/lib/hetsched/libhetsched_opencl_layer.so /usr/lib/hetsched/libhetsched_cuda_intercept.so \
         /usr/share/man/man1/hetsched.1 /usr/share/man/man1/hetsched-daemon.1 \
         /usr/share/bash-completion/completions/hetsched /usr/share/zsh/site-functions/_hetsched \
         /usr/share/fish/vendor_completions.d/hetsched.fish /usr/share/doc/hetsched/copyright; do
    [ -s "$f" ] || fail "$f was not installed"
done
grep -qx "$conffile" /var/lib/dpkg/info/hetsched.conffiles 2>/dev/null \
    || fail "$conffile is not a conffile of the package"
hetsched units --config "$conffile" >/dev/null || fail "the installed config is refused"

# The units: valid as installed (ExecStart names the installed binary),
# and enabled by the package's maintainer scripts.
units=(/usr/lib/systemd/system/hetsched.service /usr/lib/systemd/system/hetsched.socket)
if command -v systemd-analyze >/dev/null; then
    systemd-analyze verify --man=no "${units[@]}" || fail "systemd-analyze verify refused the installed units"
else
    fail "systemd-analyze not found (apt-get install systemd)"
fi
grep -q '^ExecStart=/usr/bin/hetsched daemon --config /etc/hetsched/hetsched.toml' "${units[0]}" \
    || fail "ExecStart does not name the installed binary and config"
[ -L /etc/systemd/system/multi-user.target.wants/hetsched.service ] || fail "hetsched.service is not enabled"
[ -L /etc/systemd/system/sockets.target.wants/hetsched.socket ] || fail "hetsched.socket is not enabled"

# A C program against the installed pkg-config file (no paths given: the
# system's include and library directories).
cat > "$stage/version.c" <<'EOF'
#include <hetsched.h>
#include <stdio.h>
int main(void) {
    puts(hs_version());
    return 0;
}
EOF
cc -std=c11 -Wall -Werror "$stage/version.c" -o "$stage/version" $(pkg-config --cflags --libs hetsched) \
    || fail "a C program does not build against the installed hetsched.pc"
[ "$("$stage/version")" = "$version" ] || fail "hs_version() is not $version"
cc -std=c11 -Wall -Werror crates/capi/c/example.c -o "$stage/example" $(pkg-config --cflags --libs hetsched)
HETSCHED_SOCKET="$stage/none.sock" XDG_CACHE_HOME="$stage/cache" "$stage/example" >/dev/null \
    || fail "the C example built against the installed library does not run"

# Removal keeps the conffile only; purging removes it and the enablement.
dpkg -r hetsched >/dev/null || fail "dpkg -r failed"
while IFS= read -r path; do
    [ "$path" = "$conffile" ] && continue
    [ -d "$path" ] && continue # directories shared with other packages stay
    [ ! -e "$path" ] && [ ! -L "$path" ] || fail "dpkg -r left $path behind"
done < "$stage/files"
[ -f "$conffile" ] || fail "dpkg -r removed the conffile $conffile"
dpkg --purge hetsched >/dev/null || fail "dpkg --purge failed"
[ ! -e "$conffile" ] || fail "dpkg --purge left $conffile"
[ ! -e /etc/hetsched ] || fail "dpkg --purge left /etc/hetsched"
left=$(find /etc/systemd/system -name 'hetsched.*' 2>/dev/null)
[ -z "$left" ] || fail "dpkg --purge left $left"
if dpkg-query -W -f '${Status}' hetsched 2>/dev/null | grep -q 'installed\|config-files'; then
    fail "hetsched is still known to dpkg after --purge"
fi
echo "deb check: OK ($(basename "$deb"): hetsched $version, units verified and enabled, C program against hetsched.pc, removed and purged cleanly)"
