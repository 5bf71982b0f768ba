"""Faults on a 2-node Ray cluster running hetsched.ray, run by
test_ray_faults.py inside a network namespace of its own (loopback only).

The scenarios of `make ray-faults` (python/demos/ray_faults.py) with
fewer calls, then what they leave behind: an actor's shares after its
daemon restarted, a node that joins, and a shutdown after the loss of a
node followed by a fresh init(). Prints one JSON line with what it
observed; test_ray_faults.py asserts on it.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import ray

import hetsched.ray as hray
import ray_faults as rf

CALLS = 120
TIMING = {"before": 1.0, "after": 2.5}


@hray.actor(class_="custom", shares=70, intercept=False, resources={"node-a": 0.01}, num_cpus=0)
class Pinned:
    def settings(self):
        """This process's class on its node's daemon, through hray.client()."""
        c = hray.client()
        status = c.status()
        classes = [
            u["settings"]["class"] for cl in status["clients"] if cl["pid"] == os.getpid() for u in cl["units"]
        ]
        return {"pid": os.getpid(), "daemon_pid": c.daemon_pid, "classes": classes, "reconnects": c.reconnects}


def daemons_under(base: str) -> list:
    """Pids of hetsched daemons whose command line names `base`."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(base.encode() in part for part in cmd) and any(part.endswith(b"hetsched") for part in cmd[:1]):
            pids.append(int(proc.name))
    return pids


def calls_lost_without_retries(nid_a):
    """Calls of a task with max_retries=0 (only node A's GPU runs it) on
    an executor killed while they run: they fail, and are not made again."""
    only_a = hray.task(name="only-on-a", emulated={"gpu-big": (lambda n: 0.3, rf.checksum)})
    executor, agent = rf.executor_of(nid_a), rf.agent_of(nid_a)
    pid = ray.get(executor.ready.remote())
    refs = [only_a.options(max_retries=0).remote(2000 + i) for i in range(3)]

    def gpu_busy():
        units = ray.get(agent.summary.remote())["units"]
        return any(u["name"] == "gpu-big0" and u["backlog"] >= 1 for u in units)

    rf.wait_for("the calls to reach node A's GPU", gpu_busy)
    os.kill(pid, 9)
    errors = []
    for ref in refs:
        try:
            ray.get(ref)
            errors.append(None)
        except Exception as e:
            errors.append(type(e).__name__)
    # The executor is back, and the same task with retries survives.
    pid = ray.get(executor.ready.remote())
    refs = [only_a.remote(2000 + i) for i in range(3)]
    rf.wait_for("the calls to reach node A's GPU", gpu_busy)
    os.kill(pid, 9)
    retried = [v == rf.checksum(2000 + i) for i, v in enumerate(ray.get(refs))]
    return {"errors": errors, "retried_right": retried}


def summary(run):
    return {
        "calls": run["calls"],
        "succeeded": run["succeeded"],
        "recovered_s": run["recovered_s"],
        "longest_wait_s": run["longest_wait_s"],
        "errors": run["errors"],
        "nodes": sorted({r["node"] for r in run["records"] if r.get("node")}),
    }


def main():
    t0 = time.monotonic()
    cluster, node_b = rf.start_cluster()
    report = {"cluster_start_s": time.monotonic() - t0}
    try:
        hray.init(rf.node_config, binary=os.environ.get("HETSCHED_BIN"))
        base = hray._settings.base
        task = rf.make_task()
        nid_a, nid_b = rf.node_id("node-a"), rf.node_id("node-b")
        report["nodes"] = {"a": nid_a, "b": nid_b}
        ray.get([task.remote(2000 + i) for i in range(2 * rf.INFLIGHT)])

        pinned = Pinned.remote()
        report["shares_before"] = ray.get(pinned.settings.remote())
        run = rf.fault_daemon_killed(task, nid_a, CALLS, **TIMING)
        report["daemon_killed"] = summary(run)
        report["daemon_killed"]["daemon"] = run["daemon"]
        report["summary_after_restart"] = hray.nodes()[nid_a]["daemon"]
        report["shares_after"] = ray.get(pinned.settings.remote())

        run = rf.fault_executor_killed(task, nid_a, CALLS, **TIMING)
        report["executor_killed"] = summary(run)
        report["executor_killed"]["killed_pid"] = run["fault"]["pid"]
        report["executor_pid_after"] = ray.get(rf.executor_of(nid_a).ready.remote())
        report["executor_node_after"] = ray.get(rf.executor_of(nid_a).node.remote())
        report["no_retry"] = calls_lost_without_retries(nid_a)

        run = rf.fault_node_removed(task, cluster, node_b, nid_a, CALLS, **TIMING)
        report["node_removed"] = summary(run)
        report["nodes_after_removal"] = sorted(hray.nodes())

        # A node that joins is taken in: calls reach it.
        cluster.add_node(num_cpus=2, resources={"node-c": 1})
        cluster.wait_for_nodes()
        nid_c = rf.node_id("node-c")
        report["nodes"]["c"] = nid_c
        joined = time.monotonic()
        deadline = joined + 60
        seen = set()
        while nid_c not in seen and time.monotonic() < deadline:
            seen.update(node for _, node, _ in ray.get([task.remote(2000 + i) for i in range(rf.INFLIGHT)]))
        report["joined_node_used"] = nid_c in seen
        report["join_s"] = time.monotonic() - joined

        # Shutdown after the loss of node B: everything goes, and init() can follow.
        report["daemons_before_shutdown"] = len(daemons_under(base))
        hray.shutdown()
        report["base_left"] = os.path.exists(base)
        report["daemons_after_shutdown"] = len(daemons_under(base))
        report["actors_after_shutdown"] = sorted(
            name
            for name in (hray._agent_name(n) for n in (nid_a, nid_b, nid_c))
            if _exists(name)
        )
        sockets = hray.init(rf.node_config, binary=os.environ.get("HETSCHED_BIN"))
        report["reinit_daemons"] = len(sockets)
        task2 = rf.make_task()
        inputs = [2000 + i for i in range(32)]
        got = ray.get([task2.remote(n) for n in inputs])
        report["reinit_wrong"] = sum(v != rf.checksum(n) for (v, _, _), n in zip(got, inputs))
        hray.shutdown()
    finally:
        ray.shutdown()
        cluster.shutdown()
    report["total_s"] = time.monotonic() - t0
    print(json.dumps(report))


def _exists(name):
    try:
        ray.get_actor(name, namespace=hray.NAMESPACE)
        return True
    except ValueError:
        return False


if __name__ == "__main__":
    sys.exit(main())
