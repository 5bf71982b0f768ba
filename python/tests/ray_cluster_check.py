"""A 2-node Ray cluster with a hetsched daemon per node, run by
test_ray.py inside a network namespace of its own (loopback only).

Prints one JSON line with what it observed; test_ray.py asserts on it.
Node A has a fast emulated GPU (`gpu-big`), node B a slow one
(`gpu-wimpy`); both have this machine's CPUs.
"""

from __future__ import annotations

import json
import os
import sys
import time

import ray
from ray.cluster_utils import Cluster

import hetsched
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


def node_config(node):
    if "node-a" in node["Resources"]:
        # Node A also has the real OpenCL device (PoCL) as `opencl0`, for
        # actors whose own pyopencl calls go through the OpenCL layer.
        return GPU.format(kind="gpu-big", speed=30.0).replace("device_units = false", "device_units = true")
    return GPU.format(kind="gpu-wimpy", speed=10.0)


def in_an_actor():
    return ray.get_runtime_context().get_actor_id() is not None


def checksum(n):
    return sum(i * i for i in range(n)) % 1_000_003


@hray.actor(class_="custom", shares=70, resources={"node-a": 0.01})
class Heavy:
    def burn(self, seconds, inflight=4):
        return gpu_loop(seconds, inflight)


@hray.actor(class_="custom", shares=30, resources={"node-a": 0.01})
class Light:
    def burn(self, seconds, inflight=4):
        return gpu_loop(seconds, inflight)


@ray.remote(resources={"node-a": 0.01})
class Plain:
    def burn(self, seconds, inflight=4):
        return gpu_loop(seconds, inflight)


# One launch: a short spin, then each element counts the launch.
SPIN = """
__kernel void spin(__global float *x, int n) {
    int i = get_global_id(0);
    float acc = x[i];
    for (int k = 0; k < n; k++) acc = acc * 0.999f + 1.0f;
    x[i] += 1.0f + 0.0f * acc;
}
"""


def opencl_loop(seconds):
    """Plain pyopencl (no hetsched call): launches for `seconds`, then
    checks against numpy that every launch ran; returns pid and launches."""
    import numpy as np
    import pyopencl as cl

    dev = cl.get_platforms()[0].get_devices()[0]
    ctx = cl.Context([dev])
    q = cl.CommandQueue(ctx)
    kernel = cl.Kernel(cl.Program(ctx, SPIN).build(), "spin")
    x = np.zeros(4096, np.float32)
    buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=x)
    launches = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        kernel(q, x.shape, None, buf, np.int32(400))
        launches += 1
        if launches % 4 == 0:
            q.finish()
    out = np.empty_like(x)
    cl.enqueue_copy(q, out, buf)
    q.finish()
    if not (out == np.float32(launches)).all():
        raise AssertionError(f"{launches} launches, device counted {out[:4]}")
    return os.getpid(), launches


@hray.actor(class_="custom", shares=70, resources={"node-a": 0.01})
class ClHeavy:
    def burn(self, seconds):
        return opencl_loop(seconds)


@hray.actor(class_="custom", shares=30, resources={"node-a": 0.01})
class ClLight:
    def burn(self, seconds):
        return opencl_loop(seconds)


def gpu_loop(seconds, inflight=4):
    """Keeps node A's GPU busy with `inflight` calls for `seconds`;
    returns this process's pid and how many calls it finished."""
    rt = hray.runtime()
    task = hetsched.Task("busy", emulated={"gpu-big": (lambda: 0.002, lambda: 1)})
    end = time.monotonic() + seconds
    inflight = [rt.submit(task) for _ in range(inflight)]
    done = 0
    while time.monotonic() < end:
        done += inflight.pop(0).result()
        inflight.append(rt.submit(task))
    for f in inflight:
        done += f.result()
    return os.getpid(), done


def gpu_split(status, pids, unit_name="gpu-big0"):
    """Device time on `unit_name` per pid, as the daemon charged it."""
    unit = next(u["info"]["id"] for u in status["units"] if u["info"]["name"] == unit_name)
    busy = {p: 0 for p in pids}
    for c in status["clients"]:
        if c["pid"] in busy:
            busy[c["pid"]] += sum(u["busy_ns_total"] for u in c["units"] if u["unit"] == unit)
    return busy


def shares_run(actors, agent, seconds, unit_name="gpu-big0", warm=(0.1, 1)):
    # Both actors started and connected before the measured part: an actor
    # that is up first would otherwise have the GPU to itself for a while.
    ray.get([a.burn.remote(*warm) for a in actors])
    before = ray.get(agent.status.remote())
    out = ray.get([a.burn.remote(seconds) for a in actors])
    pids = [pid for pid, _ in out]
    start = gpu_split(before, pids, unit_name)
    after = ray.get(agent.status.remote())
    end = gpu_split(after, pids, unit_name)
    used = [end[p] - start[p] for p in pids]
    # An actor's process has two connections: hetsched.ray's own client
    # and, once it touches the device, the OpenCL layer's.
    intercepted = [
        next((c["intercepted"] for c in after["clients"] if c["pid"] == p and c.get("intercepted")), None)
        for p in pids
    ]
    return [u / max(1, sum(used)) for u in used], intercepted


def main():
    t0 = time.monotonic()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "resources": {"node-a": 1}})
    cluster.add_node(num_cpus=2, resources={"node-b": 1})
    ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
    cluster.wait_for_nodes()
    report = {"cluster_start_s": time.monotonic() - t0}
    try:
        sockets = hray.init(node_config, binary=os.environ.get("HETSCHED_BIN"))
        report["daemons"] = len(sockets)

        # Tasks: placed across both nodes, each call checked.
        task = hray.task(
            name="checksum",
            cpu=checksum,
            emulated={
                "gpu-big": (lambda n: 0.003, checksum),
                "gpu-wimpy": (lambda n: 0.009, checksum),
            },
        )
        inputs = [2000 + i for i in range(120)]
        results = ray.get([task.remote(n) for n in inputs])
        report["wrong"] = sum(r != checksum(n) for r, n in zip(results, inputs))
        # The decorator form: the function is the CPU implementation.
        @hray.remote(emulated={"gpu-big": (lambda n: 0.001, checksum)}, num_cpus=0.5)
        def decorated(n):
            return checksum(n)

        report["decorated_name"] = decorated.name
        report["decorated_wrong"] = sum(r != checksum(n) for r, n in zip(ray.get([decorated.remote(n) for n in inputs[:20]]), inputs))
        # Where calls run: on the node's executor (an actor) by default, as
        # a plain Ray task when the task has Ray options.
        where = hray.task(name="where", cpu=in_an_actor)
        report["plain_call_in_actor"] = ray.get(where.remote())
        report["option_call_in_actor"] = ray.get(where.options(num_cpus=0.25).remote())
        summaries = hray.nodes()
        report["models"] = {
            next(u["name"] for u in s["units"] if u["class"] == "gpu"): s["models"].get("checksum", {})
            for s in summaries.values()
        }
        report["gpu_busy"] = {
            u["name"]: u["busy"] for s in summaries.values() for u in s["units"] if u["class"] == "gpu"
        }

        # Shares between two actors on node A: 70/30 with hetsched, and
        # what two plain actors get.
        node_a = next(n["NodeID"] for n in ray.nodes() if "node-a" in n["Resources"])
        agent = ray.get_actor(hray._agent_name(node_a), namespace=hray.NAMESPACE)
        report["split_hetsched"], _ = shares_run([Heavy.remote(), Light.remote()], agent, 3.0)
        report["split_plain"], _ = shares_run([Plain.remote(), Plain.remote()], agent, 3.0)
        # The same with actors that only make their own pyopencl calls:
        # the OpenCL layer in their environment puts them under the shares.
        report["split_opencl"], report["opencl_intercepted"] = shares_run(
            [ClHeavy.remote(), ClLight.remote()], agent, 3.0, unit_name="opencl0", warm=(0.2,)
        )

        # Errors: a task nobody can run, and a bad actor declaration.
        try:
            hray.actor()(Plain)
        except ValueError as e:
            report["actor_error"] = str(e)
        hray.shutdown()
    finally:
        ray.shutdown()
        cluster.shutdown()
    report["total_s"] = time.monotonic() - t0
    print(json.dumps(report))


if __name__ == "__main__":
    sys.exit(main())
