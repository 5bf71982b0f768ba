#!/usr/bin/env bash
# StarPU's own example programs (Debian's starpu-examples) with OpenCL
# workers only (on PoCL), each run twice: as is, and under `hetsched run`
# with the OpenCL layer against a daemon. Prints one line per example
# (its exit status both ways, and whether the daemon saw it connect through
# the layer, i.e. it allocated or launched on the device) and a count;
# exits 1 if an example that passes as is fails under the layer.
#
#   scripts/starpu-examples-under-layer.sh HETSCHED_BINARY [SECONDS_EACH]
set -uo pipefail
hs=${1:?the hetsched binary}
each=${2:-60}
dir=/usr/lib/x86_64-linux-gnu/starpu/examples
[ -d "$dir" ] || { echo "no $dir (apt-get install starpu-examples)" >&2; exit 2; }
# shellcheck source=daemon-lib.sh
. "$(dirname "$0")/daemon-lib.sh"
hs_work_dir hetsched-starpu-examples
# The devices only: no CPU units, no emulated GPU.
printf 'include_cpus = false\nstate_file = "%s/state.json"\n' "$work" >"$work/hetsched.toml"
hs_start_daemon "$hs" starpu-examples-under-layer
export HETSCHED_SOCKET=$socket HETSCHED_INTERCEPT_QUIET=1
export STARPU_OPENCL_ON_CPUS=1 STARPU_NCPU=0 STARPU_NOPENCL=1 STARPU_SILENT=1
both=0 plain_only=0 layer_only=0 neither=0 governed=0 failed=()
for exe in "$dir"/*; do
    name=$(basename "$exe")
    [ -x "$exe" ] && [ -f "$exe" ] || continue
    case $name in *.sh | *.gp) continue ;; esac
    timeout "$each" "$exe" >/dev/null 2>&1 </dev/null
    plain=$?
    seen=$(wc -l <"$work/daemon.log")
    timeout "$each" "$hs" run --class normal -- "$exe" >/dev/null 2>&1 </dev/null
    layer=$?
    # The layer connects on the program's first allocation or launch.
    if tail -n +"$((seen + 1))" "$work/daemon.log" | grep -q 'client connected.*role=Application'; then
        through=governed
        governed=$((governed + 1))
    else
        through="no device call"
    fi
    printf '%-32s as is %3d, under the layer %3d (%s)\n' "$name" "$plain" "$layer" "$through"
    if ((plain == 0 && layer == 0)); then
        both=$((both + 1))
    elif ((plain == 0)); then
        plain_only=$((plain_only + 1))
        failed+=("$name")
    elif ((layer == 0)); then
        layer_only=$((layer_only + 1))
    else
        neither=$((neither + 1))
    fi
done
echo "pass both ways: $both; pass as is only: $plain_only (${failed[*]:-none}); under the layer only: $layer_only; neither: $neither; governed through the layer: $governed"
((plain_only == 0))
