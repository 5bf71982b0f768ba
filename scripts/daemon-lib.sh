# Sourced (bash) by the shell tests and benches that need a real hetsched
# daemon on a private socket: the C API test, the StarPU check and bench.
#
#   hs_work_dir PREFIX         make $work and remove it (and stop the
#                              daemon) on exit; KEEP=1 keeps it
#   hs_config EXTRA_TOML       write $work/hetsched.toml: the state file,
#                              one emulated GPU (emu-gpu0, one stream), then
#                              EXTRA_TOML
#   hs_start_daemon BIN WHO    start BIN daemon on $work/hetsched.sock, set
#                              $socket and $daemon, wait until it listens
#                              (WHO names the caller in the error)

hs_work_dir() {
    work=$(mktemp -d "/tmp/$1.XXXXXX")
    daemon=
    trap hs_cleanup EXIT
}

hs_cleanup() {
    if [ -n "${daemon:-}" ]; then kill "$daemon" 2>/dev/null || true; wait "$daemon" 2>/dev/null || true; fi
    if [ "${KEEP:-0}" = 1 ]; then echo "work directory kept: $work" >&2; else rm -rf "$work"; fi
}

hs_config() {
    cat > "$work/hetsched.toml" <<TOML
state_file = "$work/state.json"
[[emulated]]
name = "emu-gpu0"
kind = "emu-gpu"
class = "gpu"
speed = 8.0
copy_gbps = 12.0
streams = 1
$1
TOML
}

hs_start_daemon() {
    socket=$work/hetsched.sock
    "$1" daemon --config "$work/hetsched.toml" --socket "$socket" >"$work/daemon.log" 2>&1 &
    daemon=$!
    for _ in $(seq 200); do [ -S "$socket" ] && break; sleep 0.05; done
    [ -S "$socket" ] || { cat "$work/daemon.log" >&2; echo "$2: daemon did not start" >&2; exit 1; }
}
