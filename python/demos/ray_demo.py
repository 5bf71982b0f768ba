"""The Ray benchmark (`make ray-demo`): a 2-node Ray cluster on this
machine, each node with its own hetsched daemon and emulated GPU, the six
demo applications submitted as Ray tasks.

* Node A has a fast GPU (`gpu-big`), node B a slower one (`gpu-wimpy`)
  and this machine's CPUs (both nodes run on the same cores, so only one
  daemon offers them). Each is a Ray node with one logical GPU.
* `ray-default`: Ray's scheduler, tasks asking for `num_gpus=0.5` (the
  usual way to share a GPU between two tasks), with `max_calls=0` so Ray
  reuses its worker processes (by default it starts one per GPU call). A task runs its GPU
  implementation on its node's GPU when Ray gave it one, its CPU one
  otherwise.
* `hetsched`: the same calls through `hetsched.ray.remote`: the node is
  chosen by predicted turnaround, the unit inside it by hetsched's
  runtime, under the node's agents.

Each application keeps a few calls in flight for a fixed time; every
result is checked against a reference. Throughput is device work done
per second: each call counts its Table 3 time on the fast GPU, so a heavy
call weighs more than a light one. Modes alternate, 3 runs each, after a
warm-up of each; the last line is the median ratio.

Then two Ray actors on node A declared CUSTOM 70 and 30 keep node A's GPU
busy; the split of its device time is reported with hetsched classes and
with plain Ray actors (Ray's fractional GPUs are not enforced).

Run it inside a network namespace with only loopback up (the Makefile
does): `unshare -n sh -c 'ip link set lo up && python3 ray_demo.py'`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np
import ray
from ray.cluster_utils import Cluster

import hetsched
import hetsched.ray as hray

#: Table 3 times are scaled by this (as `hetsched demo` does, ×0.5; `--time-scale`).
TIME_SCALE = 0.5
SAMPLE_BYTES = 64 * 1024
INPUTS = 8
KIB = 1024

# name: (gpu-big ms, cpu ms, gpu-wimpy ms, bytes in, bytes out) — Rinnegan Table 3.
APPS: Dict[str, Tuple[float, float, float, int, int]] = {
    "aes": (0.25, 8.0, 0.3636, 1024 * KIB, 1024 * KIB),
    "lbm": (0.8325, 1.1655, 2.331, 4096 * KIB, 0),
    "dxt": (1.4, 22.4, 4.978, 1024 * KIB, 128 * KIB),
    "lavamd": (5.0, 135.0, 18.0, 512 * KIB, 512 * KIB),
    "grep": (8.25, 82.5, 25.0, 4096 * KIB, 40 * KIB),
    "histogram": (20.75, 249.0, 62.25, 8192 * KIB, 80 * KIB),
}

GPU_NODE = """device_units = false
include_cpus = {cpus}
[[emulated]]
name = "{kind}0"
kind = "{kind}"
class = "gpu"
speed = {speed}
copy_latency_us = 10.0
copy_gbps = {gbps}
dispatch_us = 20.0
streams = 1
"""


def node_config(node) -> str:
    if "node-a" in node["Resources"]:
        return GPU_NODE.format(kind="gpu-big", speed=30.0, gbps=6.0, cpus="false")
    return GPU_NODE.format(kind="gpu-wimpy", speed=10.0, gbps=3.0, cpus="true")


# ---- the applications' kernels (numpy; small, real, checkable) -------------


def kernel(app: str, d: np.ndarray) -> int:
    if app == "aes":
        key = np.arange(d.size, dtype=np.uint8) * np.uint8(37)
        return int(np.bitwise_xor(d, key).astype(np.uint64).sum())
    if app == "lbm":
        g = d.astype(np.int64)
        for _ in range(3):
            g[1:-1] = (g[:-2] + 2 * g[1:-1] + g[2:]) // 4
        return int(g.sum())
    if app == "dxt":
        return int((d.reshape(-1, 16).astype(np.int64).sum(axis=1) // 16).sum())
    if app == "lavamd":
        x = d[::64].astype(np.int64)
        diff = np.abs(x[:, None] - x[None, :32]) + 1
        return int((1_000_000 // (diff * diff)).sum())
    if app == "grep":
        return int(np.count_nonzero((d[:-1] == 0x2A) & (d[1:] < 0x40)))
    if app == "histogram":
        bins = np.bincount(d, minlength=256).astype(np.int64)
        return int((bins * np.arange(1, 257)).sum())
    raise ValueError(app)


_inputs: Dict[Tuple[str, int], np.ndarray] = {}


def data(app: str, i: int) -> np.ndarray:
    key = (app, i)
    d = _inputs.get(key)
    if d is None:
        seed = sum(ord(c) for c in app) * 1000 + i
        d = _inputs[key] = np.random.default_rng(seed).integers(0, 256, SAMPLE_BYTES, dtype=np.uint8)
    return d


def on_cpu(app: str, i: int) -> int:
    """The CPU implementation: the kernel, repeated until the call has used
    its Table 3 CPU time of thread CPU time (a core really is busy)."""
    d = data(app, i)
    budget = APPS[app][1] * TIME_SCALE / 1e3
    start = time.thread_time()
    out = kernel(app, d)
    while time.thread_time() - start < budget:
        kernel(app, d)
    return out


def on_gpu(app: str, i: int) -> int:
    """The emulated GPUs' result (the daemon holds the device for the time)."""
    return kernel(app, data(app, i))


def gpu_seconds(kind: str):
    col = 0 if kind == "gpu-big" else 2
    return lambda app, i: APPS[app][col] * TIME_SCALE / 1e3


def sizes(app: str, i: int) -> Tuple[int, int]:
    return APPS[app][3], APPS[app][4]


def hetsched_task(app: str):
    return hray.task(
        name=f"ray-demo-{app}",
        cpu=on_cpu,
        emulated={"gpu-big": (gpu_seconds("gpu-big"), on_gpu), "gpu-wimpy": (gpu_seconds("gpu-wimpy"), on_gpu)},
        sizes=sizes,
    )


# max_calls=0: Ray otherwise starts a fresh worker process for every call
# of a task that asks for a GPU (about 0.2-1 s each here), which would
# make the comparison about process start-up, not scheduling.
@ray.remote(num_gpus=0.5, num_cpus=0.5, max_calls=0)
def ray_default_call(app: str, i: int) -> int:
    """Ray's way: the node's GPU when Ray granted one, else the CPU."""
    rt = hray.runtime()
    gpu = next((u.kind for u in rt.units() if u.unit_class == "gpu"), None)
    if ray.get_gpu_ids() and gpu is not None:
        task = _default_tasks.get((app, gpu))
        if task is None:
            task = _default_tasks[(app, gpu)] = hetsched.Task(
                f"ray-default-{app}-{gpu}", emulated={gpu: (gpu_seconds(gpu), on_gpu)}, sizes=sizes
            )
        return rt.run(task, app, i)
    return on_cpu(app, i)


_default_tasks: Dict[Tuple[str, str], hetsched.Task] = {}


# ---- one measured run -------------------------------------------------------


def run_mode(mode: str, seconds: float, inflight: int) -> Dict[str, Dict[str, float]]:
    expected = {app: [kernel(app, data(app, i)) for i in range(INPUTS)] for app in APPS}
    tasks = {app: hetsched_task(app) for app in APPS} if mode == "hetsched" else {}
    results: Dict[str, Dict[str, float]] = {}

    def submit(app: str, i: int):
        if mode == "hetsched":
            return tasks[app].remote(app, i)
        return ray_default_call.remote(app, i)

    def app_loop(app: str) -> None:
        calls = wrong = 0
        n = 0
        pending = {}
        start = time.monotonic()
        end = start + seconds
        for _ in range(inflight):
            pending[submit(app, n % INPUTS)] = n % INPUTS
            n += 1
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                i = pending.pop(ref)
                calls += 1
                wrong += ray.get(ref) != expected[app][i]
                if time.monotonic() < end:
                    pending[submit(app, n % INPUTS)] = n % INPUTS
                    n += 1
        wall = time.monotonic() - start
        results[app] = {"calls": calls, "wrong": wrong, "wall_s": wall, "per_s": calls / wall}

    busy_before = gpu_busy_ns()
    t0 = time.monotonic()
    threads = [threading.Thread(target=app_loop, args=(app,)) for app in APPS]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    busy_after = gpu_busy_ns()
    results["_gpu_busy"] = {u: (busy_after[u] - busy_before[u]) / 1e9 / wall for u in busy_after}
    return results


def gpu_busy_ns() -> Dict[str, int]:
    """Device time each node's GPU has been busy, from the daemons."""
    out = {}
    for agent in hray._agents.values():
        for u in ray.get(agent.status.remote())["units"]:
            if u["info"]["class"] == "gpu":
                out[u["info"]["name"]] = u["busy_ns_total"]
    return out


def work_rate(res: Dict[str, Dict[str, float]]) -> float:
    """Fast-GPU ms of work finished per second, all apps together."""
    return sum(r["per_s"] * APPS[app][0] for app, r in res.items() if app in APPS)


# ---- shares between two actors ---------------------------------------------


def gpu_loop(seconds: float, inflight: int):
    rt = hray.runtime()
    task = hetsched.Task("ray-demo-busy", emulated={"gpu-big": (lambda: 0.002, lambda: 1)})
    end = time.monotonic() + seconds
    pending = [rt.submit(task) for _ in range(inflight)]
    done = 0
    while time.monotonic() < end:
        done += pending.pop(0).result()
        pending.append(rt.submit(task))
    for f in pending:
        done += f.result()
    return os.getpid(), done


@hray.actor(class_="custom", shares=70, resources={"node-a": 0.01}, num_cpus=0)
class Custom70:
    def burn(self, seconds, inflight):
        return gpu_loop(seconds, inflight)


@hray.actor(class_="custom", shares=30, resources={"node-a": 0.01}, num_cpus=0)
class Custom30:
    def burn(self, seconds, inflight):
        return gpu_loop(seconds, inflight)


@ray.remote(resources={"node-a": 0.01}, num_gpus=0.35, num_cpus=0)
class Ray70:
    def burn(self, seconds, inflight):
        return gpu_loop(seconds, inflight)


@ray.remote(resources={"node-a": 0.01}, num_gpus=0.15, num_cpus=0)
class Ray30:
    def burn(self, seconds, inflight):
        return gpu_loop(seconds, inflight)


def device_split(actors, agent, seconds: float) -> List[float]:
    def busy(status, pids):
        unit = next(u["info"]["id"] for u in status["units"] if u["info"]["name"] == "gpu-big0")
        out = {p: 0 for p in pids}
        for c in status["clients"]:
            if c["pid"] in out:
                out[c["pid"]] += sum(u["busy_ns_total"] for u in c["units"] if u["unit"] == unit)
        return out

    ray.get([a.burn.remote(0.2, 1) for a in actors])  # started and registered
    before = ray.get(agent.status.remote())
    got = ray.get([a.burn.remote(seconds, 4) for a in actors])
    after = ray.get(agent.status.remote())
    pids = [p for p, _ in got]
    b0, b1 = busy(before, pids), busy(after, pids)
    used = [b1[p] - b0[p] for p in pids]
    return [u / max(1, sum(used)) for u in used]


# ---- the plot ---------------------------------------------------------------


def plot(runs: Dict[str, List[Dict[str, Dict[str, float]]]], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib is not installed: no plot)", file=sys.stderr)
        return False
    apps = list(APPS)
    med = {m: [statistics.median(r[a]["per_s"] for r in runs[m]) for a in apps] for m in runs}
    x = np.arange(len(apps))
    fig, ax = plt.subplots(figsize=(8, 4))
    for k, (m, colour) in enumerate((("ray-default", "#999999"), ("hetsched", "#1f77b4"))):
        ax.bar(x + (k - 0.5) * 0.4, med[m], 0.4, label=m, color=colour)
    for i, (d, h) in enumerate(zip(med["ray-default"], med["hetsched"])):
        ax.annotate(f"×{h / d:.2f}", (x[i] + 0.2, h), ha="center", va="bottom", fontsize=8)
    ax.set_xticks(x, apps)
    ax.set_ylim(0, max(max(v) for v in med.values()) * 1.15)
    ax.set_ylabel(f"calls per second (median of {len(runs['hetsched'])} runs)")
    ax.set_title("Six applications as Ray tasks on a 2-node cluster")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    fig.savefig(path.with_suffix(".png"), dpi=100)
    return True


def main() -> int:
    ap = argparse.ArgumentParser(description="hetsched on a 2-node Ray cluster against Ray's own scheduling")
    ap.add_argument("--out", default="ray-out", help="where the JSON and the plot go")
    ap.add_argument("--seconds", type=float, default=12.0, help="length of one measured run")
    ap.add_argument("--inflight", type=int, default=3, help="calls each app keeps in flight")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument(
        "--time-scale",
        type=float,
        default=TIME_SCALE,
        help=f"Table 3 times are multiplied by this (default {TIME_SCALE}, as `hetsched demo`)",
    )
    ap.add_argument("--binary", default=os.environ.get("HETSCHED_BIN"), help="the hetsched binary")
    args = ap.parse_args()
    if args.time_scale <= 0:
        ap.error("--time-scale must be > 0")
    # The implementations are pickled by value with the globals they use.
    globals()["TIME_SCALE"] = args.time_scale
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    t0 = time.monotonic()
    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 2, "num_gpus": 1, "resources": {"node-a": 1}}
    )
    cluster.add_node(num_cpus=2, num_gpus=1, resources={"node-b": 1})
    ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
    cluster.wait_for_nodes()
    report: Dict[str, object] = {}
    try:
        hray.init(node_config, binary=args.binary)
        print(f"cluster and daemons up in {time.monotonic() - t0:.1f} s", file=sys.stderr)
        for mode in ("ray-default", "hetsched"):
            run_mode(mode, args.seconds, args.inflight)  # warm-up: worker processes, models
        runs: Dict[str, List] = {"ray-default": [], "hetsched": []}
        for r in range(args.runs):
            for mode in ("ray-default", "hetsched"):
                res = run_mode(mode, args.seconds, args.inflight)
                runs[mode].append(res)
                wrong = sum(x["wrong"] for a, x in res.items() if a in APPS)
                print(
                    f"run {r + 1} {mode:11s}: {work_rate(res):7.1f} GPU-ms/s, "
                    + ", ".join(f"{a} {x['per_s']:.1f}/s" for a, x in res.items() if a in APPS)
                    + ", GPUs busy "
                    + ", ".join(f"{u} {100 * b:.0f} %" for u, b in res["_gpu_busy"].items())
                    + (f"  WRONG RESULTS: {wrong}" if wrong else ""),
                    file=sys.stderr,
                )
        rates = {m: [work_rate(x) for x in runs[m]] for m in runs}
        ratio = statistics.median(rates["hetsched"]) / statistics.median(rates["ray-default"])
        per_app = {
            app: statistics.median(r[app]["per_s"] for r in runs["hetsched"])
            / statistics.median(r[app]["per_s"] for r in runs["ray-default"])
            for app in APPS
        }
        wrong = sum(x["wrong"] for m in runs for res in runs[m] for a, x in res.items() if a in APPS)

        node_a = next(n["NodeID"] for n in ray.nodes() if "node-a" in n["Resources"])
        agent = ray.get_actor(hray._agent_name(node_a), namespace=hray.NAMESPACE)
        split_h = device_split([Custom70.remote(), Custom30.remote()], agent, 6.0)
        split_r = device_split([Ray70.remote(), Ray30.remote()], agent, 6.0)
        report = {
            "runs": runs,
            "work_rate": rates,
            "ratio": ratio,
            "per_app_ratio": per_app,
            "wrong": wrong,
            "actors_70_30": {"hetsched": split_h, "ray": split_r},
        }
        (out / "ray-demo.json").write_text(json.dumps(report, indent=1))
        plotted = plot(runs, out / "ray-demo.svg")
        hray.shutdown()
    finally:
        ray.shutdown()
        cluster.shutdown()

    print("per-app throughput hetsched/ray-default: " + ", ".join(f"{a} {v:.2f}" for a, v in per_app.items()))
    print(f"results checked: {'all correct' if wrong == 0 else f'{wrong} WRONG'}")
    print(
        f"actors declared 70/30 on node A's GPU: hetsched {100 * split_h[0]:.1f}/{100 * split_h[1]:.1f}, "
        f"Ray alone (num_gpus 0.35/0.15) {100 * split_r[0]:.1f}/{100 * split_r[1]:.1f}"
    )
    if plotted:
        print(f"plot: {out / 'ray-demo.svg'}")
    print(f"ray cluster throughput: hetsched/ray-default = {ratio:.2f} (2 nodes, median of {args.runs} runs)")
    return 0 if wrong == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
