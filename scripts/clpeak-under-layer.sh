#!/usr/bin/env bash
# clpeak (an unmodified OpenCL program) alone, without and with the OpenCL
# layer (`hetsched run` against a daemon), ROUNDS times each, alternating;
# prints every figure's mean both ways and their ratio, then the median
# ratio. Exits 1 if clpeak fails under the layer.
#
#   scripts/clpeak-under-layer.sh HETSCHED_BINARY [ROUNDS]
set -euo pipefail
hs=${1:?the hetsched binary}
rounds=${2:-2}
tests=(--global-bandwidth --transfer-bandwidth --kernel-latency --compute-sp)
# shellcheck source=daemon-lib.sh
. "$(dirname "$0")/daemon-lib.sh"
hs_work_dir hetsched-clpeak
# The devices only: no CPU units, no emulated GPU.
printf 'include_cpus = false\nstate_file = "%s/state.json"\n' "$work" >"$work/hetsched.toml"
hs_start_daemon "$hs" clpeak-under-layer
export HETSCHED_SOCKET=$socket HETSCHED_INTERCEPT_QUIET=1
for i in $(seq "$rounds"); do
    clpeak -p 0 -d 0 "${tests[@]}" >"$work/plain-$i.txt"
    "$hs" run --class custom --shares 100 -- clpeak -p 0 -d 0 "${tests[@]}" >"$work/layer-$i.txt" \
        || { echo "clpeak failed under the layer" >&2; exit 1; }
done
python3 - "$work" "$rounds" <<'PY'
import re, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
def figures(path):
    out, section = {}, None
    for line in open(path):
        if m := re.match(r"\s{4}(\S.*?)\s*\((\w+)\)\s*$", line):
            section = m.group(1)
        elif m := re.match(r"\s+Kernel launch latency\s*:\s*([0-9.]+)", line):
            out["Kernel launch latency (us)"] = float(m.group(1))
        elif (m := re.match(r"\s+(.+?)\s*:\s*([0-9.]+)", line)) and section:
            out[f"{section} / {m.group(1).strip()}"] = float(m.group(2))
    return out
plain = [figures(f"{work}/plain-{i}.txt") for i in range(1, rounds + 1)]
layer = [figures(f"{work}/layer-{i}.txt") for i in range(1, rounds + 1)]
ratios = []
for k in plain[0]:
    p = statistics.mean(x[k] for x in plain)
    l = statistics.mean(x[k] for x in layer)
    ratios.append(l / p)
    print(f"{k:56s} {p:10.2f} {l:10.2f} {l / p:6.3f}")
print(f"median ratio with the layer over without: {statistics.median(ratios):.3f}")
PY
