#!/usr/bin/env bash
# `make install` into a scratch DESTDIR (the debug build `make test`
# compiled), then checks what it installed as a user would
# meet it: the binary runs, the unit file passes `systemd-analyze verify`
# (pointed at the staged binary) and its sandbox is rated at most 4.0 by
# `systemd-analyze security` (packaging/unit-exposure.sh), a C program
# builds against the installed header and pkg-config file and runs, man
# pages and completions exist.
set -euo pipefail
cd "$(dirname "$0")/.."
stage=$(mktemp -d -t hetsched-install-XXXXXX)
trap 'rm -rf "$stage"' EXIT
prefix=/usr/local
root="$stage/root"

# --all-features: what `make test` already built, so nothing is compiled again.
make -s install PROFILE=debug INSTALL_FEATURES=--all-features DESTDIR="$root" PREFIX="$prefix" SYSCONFDIR=/etc >/dev/null

fail() { echo "install check: $*" >&2; exit 1; }
for f in bin/hetsched lib/libhetsched.so lib/libhetsched.a include/hetsched.h lib/pkgconfig/hetsched.pc \
         lib/systemd/system/hetsched.service lib/systemd/system/hetsched.socket share/man/man1/hetsched.1 share/man/man1/hetsched-daemon.1 \
         share/bash-completion/completions/hetsched share/zsh/site-functions/_hetsched \
         share/fish/vendor_completions.d/hetsched.fish; do
    [ -s "$root$prefix/$f" ] || fail "$prefix/$f was not installed"
done
[ -s "$root/etc/hetsched/hetsched.toml" ] || fail "/etc/hetsched/hetsched.toml was not installed"
# Debug info is split off: the installed files carry a link to it, not it.
for f in bin/hetsched lib/libhetsched.so; do
    dir=$(dirname "$f"); name=$(basename "$f")
    [ -s "$root$prefix/$dir/.debug/$name.debug" ] || fail "$prefix/$dir/.debug/$name.debug was not installed"
    sections=$(readelf -SW "$root$prefix/$f")
    grep -q '\.gnu_debuglink' <<<"$sections" || fail "$prefix/$f has no .gnu_debuglink"
    if grep -q '\.debug_line' <<<"$sections"; then fail "$prefix/$f still carries its debug info"; fi
done
"$root$prefix/bin/hetsched" --version | grep -q '^hetsched ' || fail "the installed binary does not run"
# `hetsched run` puts the installed OpenCL layer and CUDA interposer into
# the program's environment.
for f in libhetsched_opencl_layer.so libhetsched_cuda_intercept.so; do
    [ -s "$root$prefix/lib/hetsched/$f" ] || fail "$prefix/lib/hetsched/$f was not installed"
done
layers=$(env -u OPENCL_LAYERS "$root$prefix/bin/hetsched" run --class normal -- sh -c 'echo "$OPENCL_LAYERS"')
[ "$layers" = "$root$prefix/lib/hetsched/libhetsched_opencl_layer.so" ] \
    || fail "hetsched run set OPENCL_LAYERS to '$layers', not the installed layer"
grep -q "^ExecStart=$prefix/bin/hetsched daemon --config /etc/hetsched/hetsched.toml" \
    "$root$prefix/lib/systemd/system/hetsched.service" || fail "ExecStart does not name the installed binary"

# The installed example config is one the daemon accepts.
"$root$prefix/bin/hetsched" units --config "$root/etc/hetsched/hetsched.toml" >/dev/null \
    || fail "the installed config is refused"

if command -v systemd-analyze >/dev/null; then
    # verify checks that ExecStart exists: point it at the staged binary.
    mkdir -p "$stage/verify"
    sed "s|^ExecStart=$prefix/bin/hetsched|ExecStart=$root$prefix/bin/hetsched|" \
        "$root$prefix/lib/systemd/system/hetsched.service" > "$stage/verify/hetsched.service"
    cp "$root$prefix/lib/systemd/system/hetsched.socket" "$stage/verify/"
    systemd-analyze verify --man=no "$stage/verify/hetsched.service" "$stage/verify/hetsched.socket" \
        || fail "systemd-analyze verify refused the unit files"
    # The sandbox: systemd's exposure rating of the installed unit, at most 4.0.
    packaging/unit-exposure.sh "$root$prefix/lib/systemd/system/hetsched.service" 4.0 \
        || fail "the installed unit's sandbox is rated above 4.0 (systemd-analyze security)"
else
    echo "install check: systemd-analyze not found, unit file not verified and its exposure not rated" >&2
fi

# A C program against the installed header and pkg-config file.
sed -i "s|^prefix=.*|prefix=$root$prefix|; s|^libdir=.*|libdir=$root$prefix/lib|; s|^includedir=.*|includedir=$root$prefix/include|" \
    "$root$prefix/lib/pkgconfig/hetsched.pc"
cc -std=c11 -Wall -Werror crates/capi/c/example.c -o "$stage/example" \
    $(PKG_CONFIG_PATH="$root$prefix/lib/pkgconfig" pkg-config --cflags --libs hetsched) \
    -Wl,-rpath,"$root$prefix/lib"
"$stage/example" >/dev/null || fail "a C program built against the installed library does not run"

if [ -e "$root$prefix/lib/hetsched/libhetsched_starpu.so" ]; then
    readelf -d "$root$prefix/lib/hetsched/libhetsched_starpu.so" | grep -E "R(UN)?PATH" | grep -q "\[$prefix/lib\]" \
        || fail "the StarPU policy does not look for libhetsched in $prefix/lib"
fi
echo "install check: OK ($prefix: binary, library, header, pkg-config, unit, config, man pages, completions)"
