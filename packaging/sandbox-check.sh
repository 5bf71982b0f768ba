#!/usr/bin/env bash
# Runs the daemon under the sandbox of packaging/systemd/hetsched.service
# and checks that it still does its work there: it starts, serves a
# client, moves that client into its CPU cgroup (cgroup v1 `cpu`), writes
# its state file (mode 0600, from UMask=0077) and removes its socket when
# stopped. Needs root and a cgroup v1 `cpu` hierarchy.
#
#   packaging/sandbox-check.sh [path/to/hetsched]   (default target/debug/hetsched)
#
# Where systemd is PID 1, the daemon runs as a transient service
# (systemd-run) with every sandbox setting of the unit. Elsewhere (a
# container) an equivalent harness applies what can be applied without
# systemd: a private mount namespace (unshare) in which every mount is
# read-only but /dev, /proc, the unit's ReadWritePaths and the daemon's
# runtime, state and cache directories (ProtectSystem=strict,
# ProtectKernelTunables=, ProtectHome=read-only), a private /tmp
# (PrivateTmp=), the unit's capability bounding set and no_new_privs
# (setpriv) and its UMask. The system call filter and the address family
# restriction need systemd (they are rated by `systemd-analyze security`).
set -euo pipefail
cd "$(dirname "$0")/.."
unit=packaging/systemd/hetsched.service
bin=$(realpath "${1:-target/debug/hetsched}")
[ -x "$bin" ] || { echo "sandbox check: $bin is not an executable" >&2; exit 1; }
fail() { echo "sandbox check: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "needs root (the daemon's unit runs as root)"
[ -d /sys/fs/cgroup/cpu ] || fail "needs the cgroup v1 cpu hierarchy at /sys/fs/cgroup/cpu"

# The unit's value of a [Service] setting (the last one wins).
prop() { sed -n "s/^$1=//p" "$unit" | tail -1; }

# Not under /tmp: PrivateTmp= hides it from the service.
work=$(mktemp -d /run/hetsched-sandbox-XXXXXX)
daemon_pid=
cleanup() {
    [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null || true
    [ -n "${client_pid:-}" ] && kill "$client_pid" 2>/dev/null || true
    if [ "${mode:-}" = systemd ]; then systemctl stop hetsched-sandbox-check 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT
chmod 0755 "$work"
# The daemon runs from a copy in $work: a binary under /tmp (a checkout
# there) is hidden by the sandbox's private /tmp.
daemon_bin=$work/hetsched
cp "$bin" "$daemon_bin"

# Waits up to $1 s for the command after it to succeed.
wait_for() {
    local limit=$1; shift
    local end=$((SECONDS + limit))
    until "$@" >/dev/null 2>&1; do
        [ $SECONDS -lt $end ] || return 1
        sleep 0.1
    done
}

if [ "$(cat /proc/1/comm)" = systemd ] && command -v systemd-run >/dev/null; then
    mode=systemd
    run_dir=/run/hetsched-sandbox-check
    state_dir=/var/lib/hetsched-sandbox-check
    cache_dir=/var/cache/hetsched-sandbox-check
else
    mode=unshare
    run_dir=$work/run
    state_dir=$work/state
    cache_dir=$work/cache
    mkdir -m 0755 "$run_dir"
    mkdir -m 0700 "$state_dir" "$cache_dir"
fi
socket=$run_dir/hetsched.sock
cat >"$work/hetsched.toml" <<EOF
state_file = "$state_dir/state.json"
calibration_cache = "$cache_dir/calibration.json"
include_cpus = true
cpu_cgroups = true
cpu_scan_ms = 50
coordination = "off"
[[emulated]]
name = "gpu0"
class = "gpu"
speed = 8.0
copy_gbps = 12.0
EOF

case $mode in
systemd)
    # Every setting of the unit's [Service] section but how it is started
    # and where its directories are.
    props=()
    while IFS= read -r line; do
        case $line in
        ''|'#'*|'['*) continue ;;
        Type=*|ExecStart=*|Restart=*|RestartSec=*|RuntimeDirectory=*|StateDirectory=*|CacheDirectory=*|RuntimeDirectoryPreserve=*) continue ;;
        esac
        props+=(-p "$line")
    done < <(sed -n '/^\[Service\]/,/^\[/p' "$unit")
    systemd-run --quiet --unit=hetsched-sandbox-check --service-type=notify "${props[@]}" \
        -p RuntimeDirectory=hetsched-sandbox-check -p StateDirectory=hetsched-sandbox-check \
        -p CacheDirectory=hetsched-sandbox-check \
        "$daemon_bin" daemon --config "$work/hetsched.toml" --socket "$socket" \
        || fail "systemd-run could not start the daemon (journalctl -u hetsched-sandbox-check)"
    daemon_pid=$(systemctl show -p MainPID --value hetsched-sandbox-check)
    ;;
unshare)
    caps=$(prop CapabilityBoundingSet)
    bounding=-all
    for c in $caps; do
        c=${c#CAP_}
        bounding+=",+${c,,}"
    done
    rw_paths="$(prop ReadWritePaths) $work"
    umask_value=$(prop UMask)
    # In the namespace: writable mounts for the writable paths, every
    # other mount read-only but /dev and /proc, a private /tmp, then the
    # daemon with the unit's capabilities, no_new_privs and umask.
    unshare --mount --propagation private -- bash -c '
        set -euo pipefail
        rw_paths=$1; bounding=$2; umask_value=$3; shift 3
        writable=()
        for p in $rw_paths; do
            p=${p#-}
            [ -e "$p" ] || continue
            mount --rbind "$p" "$p"
            writable+=("$p")
        done
        keep() {
            case $1 in /dev|/dev/*|/proc|/proc/*) return 0 ;; esac
            for w in "${writable[@]}"; do
                case $1 in "$w"|"$w"/*) return 0 ;; esac
            done
            return 1
        }
        for mp in $(awk "{print \$5}" /proc/self/mountinfo | sort -u); do
            keep "$mp" || mount -o remount,bind,ro "$mp" 2>/dev/null || true
        done
        mount -t tmpfs -o mode=1777 tmpfs /tmp
        [ -d /var/tmp ] && mount -t tmpfs -o mode=1777 tmpfs /var/tmp
        if touch /etc/.hetsched-sandbox-probe 2>/dev/null; then
            rm -f /etc/.hetsched-sandbox-probe
            echo "sandbox check: /etc is writable in the harness" >&2
            exit 1
        fi
        umask "$umask_value"
        exec setpriv --bounding-set "$bounding" --inh-caps=-all --no-new-privs -- "$@"
    ' harness "$rw_paths" "$bounding" "$umask_value" \
        "$daemon_bin" daemon --config "$work/hetsched.toml" --socket "$socket" \
        >"$work/daemon.log" 2>&1 &
    daemon_pid=$!
    ;;
esac

status() { "$bin" status --json --socket "$socket"; }
wait_for 60 status || fail "the daemon did not come up; its log:
$(cat "$work/daemon.log" 2>/dev/null || journalctl -u hetsched-sandbox-check --no-pager | tail -20)"
# The daemon process itself (setpriv execs it; systemd's MainPID is it).
grep -q "NoNewPrivs:[[:space:]]*1" "/proc/$daemon_pid/status" || fail "the daemon runs without no_new_privs"
bounding_hex=$(sed -n 's/^CapBnd:[[:space:]]*//p' "/proc/$daemon_pid/status")

# A BACKGROUND client: it is served, put in its CPU cgroup, and its
# setting is written to the state file.
HETSCHED_SOCKET=$socket "$bin" run --class background -- \
    "$bin" load --unit gpu0 --seconds 20 >"$work/client.log" 2>&1 &
client_pid=$!
in_cgroup() { grep -q "hetsched-cpu-$daemon_pid/pid-$client_pid" "/proc/$client_pid/cgroup"; }
wait_for 30 in_cgroup || fail "the client was not moved into its CPU cgroup: $(cat "/proc/$client_pid/cgroup" "$work/client.log" "$work/daemon.log" 2>&1)"
shares=$(cat "/sys/fs/cgroup/cpu/hetsched-cpu-$daemon_pid/pid-$client_pid/cpu.shares")
[ "$shares" = 2 ] || fail "the BACKGROUND client's cpu.shares is $shares, not 2"
written() { grep -q "\"pid\": $client_pid" "$state_dir/state.json"; }
wait_for 30 written || fail "the client's setting is not in $state_dir/state.json"
state_mode=$(stat -c %a "$state_dir/state.json")
[ "$state_mode" = 600 ] || fail "the state file has mode $state_mode, not 600"
socket_mode=$(stat -c %a "$socket")
[ "$socket_mode" = 666 ] || fail "the socket has mode $socket_mode, not 666 (UMask must not reach it)"
kill "$client_pid"; wait "$client_pid" 2>/dev/null || true; client_pid=

# Stopped, it removes its socket.
if [ $mode = systemd ]; then
    systemctl stop hetsched-sandbox-check
else
    kill -TERM "$daemon_pid"
    wait "$daemon_pid" || fail "the daemon did not exit cleanly on SIGTERM; its log:
$(cat "$work/daemon.log")"
fi
daemon_pid=
[ ! -e "$socket" ] || fail "the socket was left behind"
echo "sandbox check: OK ($mode harness; capability bounding set $bounding_hex: started, served a client, applied its CPU cgroup, wrote state 0600, socket 0666, removed it on stop)"
