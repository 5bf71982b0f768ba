"""Faults on a 2-node Ray cluster running hetsched.ray (`make ray-faults`).

A `ray.cluster_utils.Cluster` of two nodes on this machine, each with its
own hetsched daemon and emulated GPU (node A `gpu-big`, node B
`gpu-wimpy`, both with this machine's CPUs). For each fault, the driver
keeps 16 calls in flight; after a steady stretch the fault strikes, and
the run goes on until at least 300 calls finished and the cluster has had
time to recover. Every result is checked against the CPU reference.

* ``daemon-killed``: ``kill -9`` of node A's hetsched daemon. Recovered:
  when node A's agent reports its restarted daemon up.
* ``executor-killed``: ``kill -9`` of node A's executor process.
  Recovered: when the restarted executor has finished a call.
* ``node-removed``: ``cluster.remove_node`` of node B. Recovered: when the
  calls finished per 0.5 s are back to what node A alone finished before
  the fault.

Prints one line per fault:
``ray fault <name>: NN.N % of calls succeeded, recovered in X.X s``
(details on stderr; with ``--json``, everything as one JSON line last).

Run it inside a network namespace with only loopback up (the Makefile
does): `unshare -n sh -c 'ip link set lo up && python3 ray_faults.py'`.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from typing import Any, Callable, Dict, List, Optional

import ray
from ray.cluster_utils import Cluster

import hetsched.ray as hray

GPU = """device_units = false
[[emulated]]
name = "{kind}0"
kind = "{kind}"
class = "gpu"
speed = {speed}
copy_gbps = 12.0
streams = 1
"""

#: Calls kept in flight.
INFLIGHT = 16
#: Steady running before the fault, s.
BEFORE = 3.0
#: Running after the fault, at least, s (more if the calls are not done).
AFTER = 4.0
#: Window over which throughput is counted, s.
WINDOW = 0.5
#: A call still unfinished this long after the run ended counts as failed, s.
GIVE_UP = 60.0


def node_config(node: Dict[str, Any]) -> str:
    if "node-a" in node["Resources"]:
        return GPU.format(kind="gpu-big", speed=30.0)
    return GPU.format(kind="gpu-wimpy", speed=10.0)


def checksum(n: int) -> int:
    return sum(i * i for i in range(n)) % 1_000_003


def traced(n: int):
    """The call's result, and where it ran: the node and the process."""
    return checksum(n), ray.get_runtime_context().get_node_id(), os.getpid()


def make_task():
    return hray.task(
        name="fault-checksum",
        cpu=traced,
        emulated={"gpu-big": (lambda n: 0.003, traced), "gpu-wimpy": (lambda n: 0.009, traced)},
    )


def start_cluster():
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "resources": {"node-a": 1}})
    node_b = cluster.add_node(num_cpus=2, resources={"node-b": 1})
    ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
    cluster.wait_for_nodes()
    return cluster, node_b


def node_id(resource: str) -> str:
    return next(n["NodeID"] for n in ray.nodes() if n.get("Alive") and resource in n["Resources"])


def agent_of(nid: str):
    return ray.get_actor(hray._agent_name(nid), namespace=hray.NAMESPACE)


def executor_of(nid: str):
    return ray.get_actor(hray._executor_name(nid), namespace=hray.NAMESPACE)


def wait_for(what: str, probe: Callable[[], Any], timeout: float = 30.0) -> Any:
    """Polls `probe` until it returns something true; raises after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        got = probe()
        if got:
            return got
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.01)


def run_with_fault(
    task,
    fault: Callable[[], Any],
    recovered: Callable[[Dict[str, Any]], Optional[float]],
    calls: int,
    before: float = BEFORE,
    after: float = AFTER,
) -> Dict[str, Any]:
    """Keeps INFLIGHT calls of `task` in flight; calls `fault()` after
    `before` s (and a third of `calls`), goes on until `calls` finished and
    `after` s passed since the fault. `recovered(run)` gives the recovery
    time from the record. Returns the record."""
    inputs = [2000 + i % 64 for i in range(64)]
    expected = [checksum(n) for n in inputs]
    pending: Dict[Any, tuple] = {}
    done: List[Dict[str, Any]] = []
    submit_errors = 0
    n = 0
    fault_at: Optional[float] = None
    fault_info: Any = None
    start = time.monotonic()

    def submit() -> None:
        nonlocal n, submit_errors
        while True:
            i = n % len(inputs)
            n += 1
            t = time.monotonic()
            try:
                pending[task.remote(inputs[i])] = (i, t)
                return
            except Exception as e:  # counted as a failed call, and made again
                submit_errors += 1
                done.append({"ok": False, "submitted": t, "finished": time.monotonic(), "error": repr(e)[:200]})
                if not more():
                    return

    def more() -> bool:
        return len(done) + len(pending) < calls or fault_at is None or time.monotonic() - fault_at < after

    for _ in range(INFLIGHT):
        submit()
    while pending:
        now = time.monotonic()
        if fault_at is None and now - start >= before and len(done) >= calls // 3:
            fault_at = time.monotonic()
            fault_info = fault()
        if fault_at is not None and now - fault_at > after + GIVE_UP:
            for ref, (i, t) in pending.items():
                done.append({"ok": False, "submitted": t, "finished": now, "error": "never finished"})
            break
        ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.2)
        if ready:
            ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=0)
        for ref in ready:
            i, t = pending.pop(ref)
            rec: Dict[str, Any] = {"submitted": t, "finished": time.monotonic()}
            try:
                value, nid, pid = ray.get(ref)
                rec.update(ok=value == expected[i], node=nid, pid=pid)
                if value != expected[i]:
                    rec["error"] = f"wrong result {value}, expected {expected[i]}"
            except Exception as e:
                rec.update(ok=False, error=repr(e)[:200])
            done.append(rec)
            if more():
                submit()
    run = {
        "calls": len(done),
        "succeeded": sum(r["ok"] for r in done),
        "submit_errors": submit_errors,
        "start": start,
        "fault_at": fault_at,
        "fault": fault_info,
        "records": done,
        "errors": sorted({r["error"] for r in done if not r["ok"]})[:5],
        "longest_wait_s": max(r["finished"] - r["submitted"] for r in done),
    }
    run["recovered_s"] = recovered(run)
    return run


def rate(records: List[Dict[str, Any]], t0: float, t1: float, node: Optional[str] = None) -> float:
    """Calls per second that succeeded between t0 and t1 (on `node`)."""
    k = sum(1 for r in records if r["ok"] and t0 <= r["finished"] < t1 and (node is None or r.get("node") == node))
    return k / max(1e-9, t1 - t0)


def throughput_back(run: Dict[str, Any], node: str) -> Optional[float]:
    """Seconds from the fault until the calls finished per WINDOW are back
    to what `node` finished alone before the fault."""
    f = run["fault_at"]
    # The first moments (the first calls of a run) are left out.
    before = rate(run["records"], run["start"] + min(0.5, (f - run["start"]) / 2), f, node)
    ends = sorted(r["finished"] for r in run["records"] if r["ok"] and r["finished"] > f)
    for t in ends:
        if t - f >= WINDOW and rate(run["records"], t - WINDOW, t) >= before:
            return t - WINDOW - f if t - WINDOW > f else 0.0
    return None


def fault_daemon_killed(task, nid: str, calls: int, **timing: float) -> Dict[str, Any]:
    agent = agent_of(nid)

    def fault():
        state = ray.get(agent.daemon_state.remote())
        os.kill(state["pid"], signal.SIGKILL)
        return {"pid": state["pid"], "wall": time.time()}

    run = run_with_fault(task, fault, lambda run: None, calls, **timing)
    old = run["fault"]["pid"]
    state = wait_for(
        "the daemon's restart",
        lambda: (s := ray.get(agent.daemon_state.remote()))["up"] and s["pid"] != old and s,
    )
    run["daemon"] = state
    run["recovered_s"] = state["restarted_at"] - run["fault"]["wall"]
    return run


def fault_executor_killed(task, nid: str, calls: int, **timing: float) -> Dict[str, Any]:
    executor = executor_of(nid)

    def fault():
        pid = ray.get(executor.ready.remote())
        os.kill(pid, signal.SIGKILL)
        return {"pid": pid}

    def recovered(run):
        f, old = run["fault_at"], run["fault"]["pid"]
        after = [r["finished"] - f for r in run["records"] if r["ok"] and r.get("node") == nid and r["pid"] != old and r["finished"] > f]
        return min(after) if after else None

    return run_with_fault(task, fault, recovered, calls, **timing)


def fault_node_removed(task, cluster, node_b, nid_a: str, calls: int, **timing: float) -> Dict[str, Any]:
    def fault():
        cluster.remove_node(node_b)
        return {}

    return run_with_fault(task, fault, lambda run: throughput_back(run, nid_a), calls, **timing)


def line(name: str, run: Dict[str, Any]) -> str:
    pct = 100.0 * run["succeeded"] / max(1, run["calls"])
    rec = run["recovered_s"]
    rec_s = f"{rec:.1f} s" if rec is not None else "never"
    return f"ray fault {name}: {pct:.1f} % of calls succeeded, recovered in {rec_s}"


def details(name: str, run: Dict[str, Any]) -> str:
    nodes: Dict[str, int] = {}
    for r in run["records"]:
        if r.get("node"):
            nodes[r["node"][:8]] = nodes.get(r["node"][:8], 0) + 1
    return (
        f"  {name}: {run['succeeded']}/{run['calls']} calls right, longest call {run['longest_wait_s']:.2f} s, "
        f"calls per node {nodes}" + (f", errors {run['errors']}" if run["errors"] else "")
    )


def run_all(cluster, node_b, calls: int) -> Dict[str, Dict[str, Any]]:
    """The three faults in turn, on an initialised cluster (node B is gone after)."""
    task = make_task()
    nid_a = node_id("node-a")
    # Warm-up: executors' runtimes and the task's models on both nodes.
    ray.get([task.remote(2000 + i) for i in range(4 * INFLIGHT)])
    runs = {
        "daemon-killed": fault_daemon_killed(task, nid_a, calls),
        "executor-killed": fault_executor_killed(task, nid_a, calls),
        "node-removed": fault_node_removed(task, cluster, node_b, nid_a, calls),
    }
    return runs


def main() -> int:
    ap = argparse.ArgumentParser(description="hetsched.ray under faults on a 2-node Ray cluster")
    ap.add_argument("--calls", type=int, default=300, help="calls per fault, at least")
    ap.add_argument("--json", action="store_true", help="also print everything as one JSON line")
    ap.add_argument("--binary", default=os.environ.get("HETSCHED_BIN"), help="the hetsched binary")
    args = ap.parse_args()
    if args.calls < 3 * INFLIGHT:
        ap.error(f"--calls must be at least {3 * INFLIGHT}")
    # Ray prints the errors it hears of (the workers killed here) to
    # stdout: they go to stderr, the table alone to stdout.
    out, sys.stdout = sys.stdout, sys.stderr
    t0 = time.monotonic()
    cluster, node_b = start_cluster()
    try:
        hray.init(node_config, binary=args.binary)
        print(f"cluster and daemons up in {time.monotonic() - t0:.1f} s", file=sys.stderr)
        runs = run_all(cluster, node_b, args.calls)
        hray.shutdown()
    finally:
        ray.shutdown()
        cluster.shutdown()
    for name, run in runs.items():
        print(details(name, run), file=sys.stderr)
    for name, run in runs.items():
        print(line(name, run), file=out)
    if args.json:
        for run in runs.values():
            run.pop("records")
        print(json.dumps(runs), file=out)
    ok = all(r["succeeded"] >= 0.99 * r["calls"] and r["recovered_s"] is not None for r in runs.values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
