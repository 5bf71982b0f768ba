"""hetsched on a Ray cluster: one daemon per node, tasks placed on the node
and the unit that finish them soonest, shares for actors.

Usage (after ``ray.init()``)::

    import hetsched.ray as hray

    hray.init()                      # a hetsched daemon on every Ray node

    @hray.remote(emulated={"gpu-big": (cost, kernel)})
    def checksum(data): ...          # the CPU implementation

    ref = checksum.remote(data)      # a Ray ObjectRef, as with @ray.remote

    @hray.actor(class_="custom", shares=70)
    class Trainer: ...               # 70 % of its node's units, enforced

How it works:

* :func:`init` starts a *node agent* (a Ray actor with ``num_cpus=0``)
  pinned on every alive node. It runs ``hetsched daemon`` with that node's
  config on a socket of its own, and answers :meth:`_NodeAgent.summary`: a
  compact view of each unit's load read from the daemon's shared pages,
  and the per-kind execution times the node's workers have learned.
* A task submitted with ``.remote()`` goes to the node with the smallest
  predicted turnaround: each node is a set of servers (its units with an
  implementation of the task), each serving at ``slots / (exec × (1 +
  backlog / slots))``; the calls this driver already has in flight there
  queue ahead of the new one. The call goes to that node's *executor* (a
  threaded Ray actor, one per node), which runs it through a
  :class:`hetsched.Runtime` on the node's daemon: hetsched places it on a
  unit, under the node's agents. (A task declared with Ray options such
  as ``num_cpus`` is instead a Ray task pinned to the node with
  ``NodeAffinitySchedulingStrategy``.)
* An actor declared with :func:`actor` sets its process's class and
  shares on its node's daemon when it starts; every unit's agent enforces
  them between the Ray workers of the node.

Ray is imported only when this module is.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

import ray
from ray import cloudpickle
from ray.experimental.internal_kv import _internal_kv_get, _internal_kv_put
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

import hetsched

NAMESPACE = "hetsched"
_log = logging.getLogger(__name__)
#: How often a driver that places calls refreshes the nodes' summaries, s.
SUMMARY_TTL = 0.05
#: A driver that placed no call for this long stops refreshing them (and
#: reads them afresh when it places one again), s.
PLACER_IDLE = 1.0
#: How long a node agent waits for its daemon to answer, s.
DAEMON_START_TIMEOUT = 30.0
#: Calls a node's executor runs at once (threads of one Ray actor); the
#: node's daemon, not this number, decides which of them use a unit when.
EXECUTOR_THREADS = 32

NodeConfig = Union[None, str, Mapping[str, str], Callable[[Dict[str, Any]], str]]


def _agent_name(node_id: str) -> str:
    return f"hetsched-node-{node_id}"


def _executor_name(node_id: str) -> str:
    return f"hetsched-exec-{node_id}"


def _binary(explicit: Optional[str]) -> str:
    path = explicit or os.environ.get("HETSCHED_BIN") or shutil.which("hetsched")
    if not path:
        raise hetsched.HetschedError(
            "no hetsched binary for the node daemons: put `hetsched` on PATH, "
            "set HETSCHED_BIN, or pass binary= to hetsched.ray.init()"
        )
    return path


class _NodeAgent:
    """One per Ray node: runs the node's daemon and reports its load."""

    def __init__(self, node_id: str, config: str, binary: str, base_dir: str) -> None:
        self.node_id = node_id
        self.work = Path(base_dir) / node_id[:16]
        self.work.mkdir(parents=True, exist_ok=True)
        self.socket_path = str(self.work / "hetsched.sock")
        config_path = self.work / "hetsched.toml"
        config_path.write_text(f'state_file = "{self.work}/state.json"\n' + config)
        self.log = self.work / "daemon.log"
        self.daemon = subprocess.Popen(
            # --parent-pid: the daemon stops when this agent dies, even by SIGKILL.
            [binary, "daemon", "--config", str(config_path), "--socket", self.socket_path]
            + ["--parent-pid", str(os.getpid())],
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
        )
        self.client = self._connect()
        self.units = self.client.units()
        self.models: Dict[str, Dict[str, float]] = {}

    def _connect(self) -> "hetsched.Client":
        deadline = time.monotonic() + DAEMON_START_TIMEOUT
        while True:
            if self.daemon.poll() is not None:
                raise hetsched.HetschedError(
                    f"the hetsched daemon of node {self.node_id} exited ({self.daemon.returncode}): "
                    + self.log.read_text()[-2000:]
                )
            try:
                return hetsched.Client("hetsched-ray-node", socket=self.socket_path)
            except hetsched.DaemonUnavailable:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def socket(self) -> str:
        return self.socket_path

    def summary(self) -> Dict[str, Any]:
        """The node's units and their load now, and the learned times."""
        units = []
        for u in self.units:
            v = self.client.view(u.name)
            units.append(
                {
                    "name": u.name,
                    "kind": u.kind,
                    "class": u.unit_class,
                    "slots": u.slots,
                    "speed": u.relative_speed,
                    "busy": v["busy_fraction"],
                    "backlog": v["queued"] + v["running"],
                    "runnable": v["runnable_threads"],
                }
            )
        return {"node_id": self.node_id, "units": units, "models": self.models}

    def learn(self, task: str, times: Dict[str, Optional[float]]) -> None:
        """A worker's model of `task`: seconds per kind (None: not known)."""
        known = {k: t for k, t in times.items() if t is not None}
        self.models.setdefault(task, {}).update(known)

    def status(self) -> Dict[str, Any]:
        return self.client.status()

    def stop(self) -> None:
        self.client.close()
        self.daemon.terminate()
        try:
            self.daemon.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.daemon.kill()
            self.daemon.wait()
        shutil.rmtree(self.work, ignore_errors=True)


class _NodeExecutor:
    """One per Ray node: a threaded actor that runs the calls of hetsched
    tasks through the node's :class:`hetsched.Runtime`. A call is then an
    actor call (no worker lease, no worker process per concurrent call),
    and up to :data:`EXECUTOR_THREADS` calls wait on the node's units at
    once: the node's daemon orders them, and the runtime waits without the
    GIL."""

    def ready(self) -> int:
        runtime()
        return os.getpid()

    def run(self, spec_key: str, *args: Any) -> Any:
        return _run_task(spec_key, *args)


_state_lock = threading.Lock()
_agents: Dict[str, Any] = {}
_executors: Dict[str, Any] = {}
#: Folders init() made for the daemons, removed by shutdown().
_made_dirs: List[str] = []


def _config_for(node: Dict[str, Any], config: NodeConfig) -> str:
    if config is None:
        return ""
    if isinstance(config, str):
        return config
    if callable(config):
        return config(node)
    return config.get(node["NodeID"], "")


def init(
    config: NodeConfig = None,
    *,
    binary: Optional[str] = None,
    base_dir: Optional[str] = None,
    executor_threads: int = EXECUTOR_THREADS,
) -> Dict[str, str]:
    """Starts a hetsched daemon on every alive Ray node (call after
    ``ray.init()``); returns ``{node_id: socket}``.

    ``config`` is the daemons' TOML (emulated units, policies …): one text
    for every node, a ``{node_id: text}`` mapping, or a function of the
    node's ``ray.nodes()`` entry (to give nodes different devices by their
    resources). Each daemon works in a folder of its own under `base_dir`
    (default: a new temporary folder, removed by :func:`shutdown`). The
    daemons stop with :func:`shutdown`, or when the driver exits.

    Each node also gets an executor (a Ray actor with `executor_threads`
    threads) that runs the calls of hetsched tasks declared without Ray
    options.
    """
    if executor_threads < 1:
        raise ValueError(f"executor_threads must be at least 1, not {executor_threads}")
    if not ray.is_initialized():
        raise hetsched.HetschedError("call ray.init() before hetsched.ray.init()")
    exe = _binary(binary)
    base = base_dir
    if base is None:
        base = tempfile.mkdtemp(prefix="hetsched-ray-")
        _made_dirs.append(base)
    agent_cls = ray.remote(num_cpus=0)(_NodeAgent)
    exec_cls = ray.remote(num_cpus=0, max_concurrency=executor_threads)(_NodeExecutor)
    started = {}
    with _state_lock:
        for node in ray.nodes():
            if not node.get("Alive") or node["NodeID"] in _agents:
                continue
            nid = node["NodeID"]
            started[nid] = agent_cls.options(
                name=_agent_name(nid),
                namespace=NAMESPACE,
                scheduling_strategy=NodeAffinitySchedulingStrategy(nid, soft=False),
            ).remote(nid, _config_for(node, config), exe, base)
        _agents.update(started)
        agents = dict(_agents)
    sockets = ray.get([a.socket.remote() for a in agents.values()])
    executors = {
        nid: exec_cls.options(
            name=_executor_name(nid),
            namespace=NAMESPACE,
            scheduling_strategy=NodeAffinitySchedulingStrategy(nid, soft=False),
        ).remote()
        for nid in started
    }
    ray.get([e.ready.remote() for e in executors.values()])
    with _state_lock:
        _executors.update(executors)
    _placer.start()
    return dict(zip(agents, sockets))


def shutdown() -> None:
    """Stops the node daemons started by :func:`init`."""
    _placer.stop()
    with _state_lock:
        agents = dict(_agents)
        executors = list(_executors.values())
        _agents.clear()
        _executors.clear()
    for e in executors:
        ray.kill(e)
    ray.get([a.stop.remote() for a in agents.values()])
    for a in agents.values():
        ray.kill(a)
    while _made_dirs:
        shutil.rmtree(_made_dirs.pop(), ignore_errors=True)


def nodes() -> Dict[str, Dict[str, Any]]:
    """Every node's summary now: ``{node_id: {"units": [...], "models": {...}}}``."""
    with _state_lock:
        agents = dict(_agents)
    return dict(zip(agents, ray.get([a.summary.remote() for a in agents.values()])))


# ---- on the workers -------------------------------------------------------

_worker_lock = threading.Lock()
_worker: Dict[str, Any] = {}


def _node_agent() -> Any:
    nid = ray.get_runtime_context().get_node_id()
    with _worker_lock:
        agent = _worker.get("agent")
        if agent is None:
            try:
                agent = ray.get_actor(_agent_name(nid), namespace=NAMESPACE)
            except ValueError:
                raise hetsched.HetschedError(
                    f"no hetsched daemon on Ray node {nid}: call hetsched.ray.init() on the driver"
                ) from None
            _worker["agent"] = agent
            _worker["socket"] = ray.get(agent.socket.remote())
        return agent


def socket() -> str:
    """This Ray worker's node daemon socket."""
    _node_agent()
    return _worker["socket"]


def _once_per_worker(key: str, make: Callable[[str], Any]) -> Any:
    """The worker's one object under `key`, made by `make(socket)` on first use."""
    with _worker_lock:
        obj = _worker.get(key)
    if obj is None:
        path = socket()
        with _worker_lock:
            obj = _worker.get(key)
            if obj is None:
                obj = _worker[key] = make(path)
    return obj


def runtime() -> "hetsched.Runtime":
    """The :class:`hetsched.Runtime` of this Ray worker, on its node's daemon."""
    # One model file per node, shared by its workers: a worker started late
    # loads what the others learned instead of profiling every kind again.
    return _once_per_worker(
        "runtime",
        lambda path: hetsched.Runtime(
            "ray-worker", monitor="daemon", socket=path, model_dir=str(Path(path).parent / "models")
        ),
    )


def client() -> "hetsched.Client":
    """A :class:`hetsched.Client` of this Ray worker on its node's daemon."""
    return _once_per_worker("client", lambda path: hetsched.Client(f"ray-{os.getpid()}", socket=path))


#: Reports of a worker's model to its node agent happen when an estimate
#: moved by more than this fraction (or was not known) ...
_REPORT_CHANGE = 0.25
#: ... and at most this often per task, s (a kind first known is reported at once).
_REPORT_EVERY = 5.0


def _run_task(spec_key: str, *args: Any) -> Any:
    """The body of every hetsched Ray task, on the node it was pinned to.

    The task's implementations come once per worker process: the driver
    put its :class:`_Spec`, pickled, in Ray's key-value store under
    `spec_key`, and a worker reads it the first time it sees the key
    (sending the implementations with every call cost each call an
    unpickling)."""
    rt = runtime()
    specs = _worker.setdefault("specs", {})
    entry = specs.get(spec_key)
    if entry is None:
        blob = _internal_kv_get(spec_key, namespace=NAMESPACE)
        if blob is None:
            raise hetsched.HetschedError(f"hetsched task {spec_key} is not in Ray's store")
        spec = cloudpickle.loads(blob)
        entry = specs[spec_key] = (spec, hetsched.Task(spec.name, **spec.impls))
    spec, task = entry
    out = rt.run(task, *args)
    _report_model(rt, spec.name, _bytes_in(spec, args))
    return out


def _bytes_in(spec: "_Spec", args: Tuple[Any, ...]) -> int:
    sizes = spec.impls.get("sizes")
    if sizes is None:
        return 0
    return int(sizes(*args)[0] if callable(sizes) else sizes[0])


_report_lock = threading.Lock()


def _report_model(rt: "hetsched.Runtime", name: str, bytes_in: int) -> None:
    """Tells the node agent (and the node's model file) what this worker
    learned of `name`, when an estimate moved."""
    times = rt.predict(name, bytes_in)
    with _report_lock:
        due = _report_due(name, times)
    if due is not None:
        _node_agent().learn.remote(name, times)
        if due:
            rt.save_models()


def _report_due(name: str, times: Dict[str, Optional[float]]) -> Optional[bool]:
    """Whether `times` should be reported (None: not now; True: a kind is
    new, so the model file is written too), recording it as reported."""
    reported = _worker.setdefault("reported", {}).setdefault(name, {})
    last = _worker.setdefault("reported_at", {})
    now = time.monotonic()
    new_kind = any(t is not None and k not in reported for k, t in times.items())
    moved = any(
        t is not None and k in reported and abs(t - reported[k]) > _REPORT_CHANGE * reported[k]
        for k, t in times.items()
    )
    if not new_kind and not (moved and now - last.get(name, 0.0) >= _REPORT_EVERY):
        return None
    last[name] = now
    reported.update({k: t for k, t in times.items() if t is not None})
    return new_kind


_remote_run = None


def _remote_body() -> Any:
    global _remote_run
    if _remote_run is None:
        _remote_run = ray.remote(_run_task)
    return _remote_run


# ---- on the driver --------------------------------------------------------


class _Spec:
    """What a worker needs to build the task: its name and implementations."""

    def __init__(self, name: str, impls: Dict[str, Any]) -> None:
        self.name = name
        self.impls = impls


def _implements(kinds: List[str], unit: Dict[str, Any]) -> bool:
    if unit["class"] == "cpu":
        return "cpu" in kinds
    kind = unit["kind"]
    if kind.startswith("opencl:"):
        return "opencl" in kinds
    if kind.startswith("cuda:"):
        return "cuda" in kinds
    return kind in kinds


def _scaled_estimate(
    unit: Dict[str, Any], times: Dict[str, float], speeds: Dict[str, float]
) -> Optional[float]:
    """A device kind's time not measured yet, from a measured device kind
    and the two units' relative speeds; None when no device kind is known."""
    if unit["class"] == "cpu":
        return None
    for kind, t in times.items():
        speed = speeds.get(kind)
        if kind != "cpu" and speed and unit["speed"] > 0:
            return t * speed / unit["speed"]
    return None


def node_rate(
    kinds: List[str],
    times: Dict[str, float],
    summary: Dict[str, Any],
    speeds: Optional[Dict[str, float]] = None,
) -> Optional[float]:
    """Calls per second a node can be expected to finish for a task with
    implementations `kinds` and execution times `times` (per unit kind,
    s): each implemented unit serves ``slots / (exec × (1 + backlog /
    slots))``; CPU kinds are slowed by the runnable threads beyond their
    cores. A device kind not measured yet is estimated from a measured one
    and their relative speeds (`speeds`, by kind). ``None`` when the node
    has a unit the task could use whose time cannot be told yet (it should
    be tried), ``0.0`` when it has none."""
    speeds = speeds or {}
    rate = 0.0
    for u in summary["units"]:
        if not _implements(kinds, u):
            continue
        kind_key = "cpu" if u["class"] == "cpu" else u["kind"]
        t = times.get(kind_key)
        if t is None:
            t = _scaled_estimate(u, times, speeds)
        if t is None:
            return None
        slots = max(1, u["slots"])
        if u["class"] == "cpu":
            stretch = max(1.0, u["runnable"] / slots)
        else:
            stretch = 1.0 + u["backlog"] / slots
        rate += slots / (max(t, 1e-6) * stretch)
    return rate


class _Placer:
    """The driver's view of the nodes: their summaries and the calls it has
    in flight on each, kept fresh by a thread of its own (every
    :data:`SUMMARY_TTL`), so that choosing a node never waits on Ray."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.summaries: Dict[str, Dict[str, Any]] = {}
        self.refreshed_at = 0.0
        self.chosen_at = 0.0
        #: Ticks of the thread that found the driver idle (for tests).
        self.idle_ticks = 0
        self.inflight: Dict[str, List[Any]] = {}
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._failing = False

    def start(self) -> None:
        """Reads the summaries once, then keeps them fresh until :meth:`stop`."""
        self._refresh()
        if self._thread is None:
            self._stop.clear()
            # A daemon thread so that a driver that never calls shutdown()
            # can still exit; shutdown() stops and joins it.
            self._thread = threading.Thread(target=self._loop, name="hetsched-ray-placer", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stops the refreshing thread and forgets the nodes."""
        thread, self._thread = self._thread, None
        if thread is not None:
            self._stop.set()
            thread.join()
        with self.lock:
            self.summaries, self.inflight, self.refreshed_at = {}, {}, 0.0

    def _loop(self) -> None:
        while not self._stop.wait(SUMMARY_TTL):
            with self.lock:
                idle = time.monotonic() - self.chosen_at > PLACER_IDLE
            if idle:
                self.idle_ticks += 1
                continue
            try:
                self._refresh()
                self._failing = False
            except Exception as e:  # a node agent gone, Ray shutting down
                if not self._failing:
                    _log.warning("hetsched.ray: cannot refresh the nodes' summaries: %s", e)
                self._failing = True

    def _refresh(self) -> None:
        summaries = nodes()
        with self.lock:
            snapshot = {nid: list(refs) for nid, refs in self.inflight.items() if refs}
        finished = set()
        for refs in snapshot.values():
            done, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
            finished.update(done)
        with self.lock:
            self.summaries = summaries
            self.refreshed_at = time.monotonic()
            for nid in snapshot:
                self.inflight[nid] = [r for r in self.inflight[nid] if r not in finished]

    def choose(self, name: str, kinds: List[str]) -> str:
        now = time.monotonic()
        with self.lock:
            stale = now - self.refreshed_at > PLACER_IDLE
            self.chosen_at = now
        if stale:
            self._refresh()
        with self.lock:
            if not self.summaries:
                raise hetsched.HetschedError("no node runs a hetsched daemon: call hetsched.ray.init()")
            times: Dict[str, float] = {}
            speeds: Dict[str, float] = {}
            for x in self.summaries.values():
                times.update(x["models"].get(name, {}))
                speeds.update((u["kind"], u["speed"]) for u in x["units"])
            best, best_t = None, float("inf")
            able = []
            for nid, s in self.summaries.items():
                waiting = len(self.inflight.get(nid, ()))
                rate = node_rate(kinds, times, s, speeds)
                if rate != 0.0:
                    able.append(nid)
                if rate is None:
                    # An untried unit: one call at a time until it is known.
                    t = 0.0 if waiting == 0 else float("inf")
                elif rate <= 0.0:
                    continue
                else:
                    t = (waiting + 1) / rate
                if t < best_t:
                    best, best_t = nid, t
            if best is None:
                if not able:
                    raise hetsched.HetschedError(
                        f"task {name}: no Ray node has a unit for its implementations ({', '.join(kinds)})"
                    )
                # Every able node is being tried: the one with the fewest in flight.
                best = min(able, key=lambda n: len(self.inflight.get(n, ())))
            return best

    def sent(self, nid: str, ref: Any) -> None:
        with self.lock:
            self.inflight.setdefault(nid, []).append(ref)


_placer = _Placer()


class RemoteTask:
    """A task that runs on the Ray cluster under hetsched (made by :func:`remote`)."""

    def __init__(self, name: str, impls: Dict[str, Any], options: Dict[str, Any]) -> None:
        self.name = name
        self.kinds = hetsched.Task(name, **impls).implementations
        self._spec = _Spec(name, impls)
        self._spec_key = f"task/{name}/{uuid.uuid4().hex}"
        self._stored = False
        self._options = options
        # The remote function with its options, per node (`.options()` is
        # not free, and a node's options never change).
        self._by_node: Dict[str, Any] = {}

    def options(self, **ray_options: Any) -> "RemoteTask":
        """The same task with other Ray options (``num_cpus``, ``max_retries`` …)."""
        t = RemoteTask.__new__(RemoteTask)
        t.__dict__.update(self.__dict__)
        t._options = {**self._options, **ray_options}
        t._by_node = {}
        return t

    def remote(self, *args: Any) -> Any:
        """Submits one call; returns its Ray ``ObjectRef``."""
        if not self._stored:
            _internal_kv_put(self._spec_key, cloudpickle.dumps(self._spec), namespace=NAMESPACE)
            self._stored = True
        nid = _placer.choose(self.name, self.kinds)
        if self._options:
            fn = self._by_node.get(nid)
            if fn is None:
                fn = self._by_node[nid] = _remote_body().options(
                    scheduling_strategy=NodeAffinitySchedulingStrategy(nid, soft=False),
                    **self._options,
                )
            ref = fn.remote(self._spec_key, *args)
        else:
            with _state_lock:
                executor = _executors.get(nid)
            if executor is None:
                raise hetsched.HetschedError(f"no hetsched executor on Ray node {nid}: call hetsched.ray.init()")
            ref = executor.run.remote(self._spec_key, *args)
        _placer.sent(nid, ref)
        return ref


def task(
    name: str,
    *,
    cpu: Optional[Callable[..., Any]] = None,
    opencl: Optional[Callable[..., Any]] = None,
    cuda: Optional[Callable[..., Any]] = None,
    emulated: Optional[Dict[str, Tuple[Callable[..., Any], Callable[..., Any]]]] = None,
    sizes: Any = None,
    **ray_options: Any,
) -> RemoteTask:
    """A hetsched task on the Ray cluster, named `name` (it keys the learned
    model). Implementations are as for :class:`hetsched.Task`.

    Without other keywords a call runs on its node's executor (an actor
    call: cheap, and as many calls wait on the node's units as it has
    threads). Other keywords are Ray task options (``num_cpus``,
    ``max_retries`` …): the call is then a plain Ray task pinned to the
    chosen node, and Ray holds the resources it asks for while it runs."""
    impls: Dict[str, Any] = {}
    if cpu is not None:
        impls["cpu"] = cpu
    if opencl is not None:
        impls["opencl"] = opencl
    if cuda is not None:
        impls["cuda"] = cuda
    if emulated:
        impls["emulated"] = dict(emulated)
    if sizes is not None:
        impls["sizes"] = sizes
    return RemoteTask(name, impls, dict(ray_options))


def remote(_fn: Optional[Callable[..., Any]] = None, **kwargs: Any) -> Any:
    """:func:`task` as a decorator: ``@remote`` or ``@remote(opencl=...,
    emulated=..., sizes=..., num_cpus=...)`` over a function gives a
    :class:`RemoteTask` named after it (or ``name=``), whose CPU
    implementation is the function unless ``cpu=`` is given."""

    def make(fn: Callable[..., Any]) -> RemoteTask:
        opts = dict(kwargs)
        opts.setdefault("cpu", fn)
        return task(opts.pop("name", None) or fn.__qualname__, **opts)

    return make if _fn is None else make(_fn)


#: The OpenCL layer and the CUDA interposer (``hetsched run`` loads them too).
OPENCL_LAYER = "libhetsched_opencl_layer.so"
CUDA_INTERPOSER = "libhetsched_cuda_intercept.so"


def interposer(name: str, binary: Optional[str] = None) -> Optional[str]:
    """The path of interposer library `name` on this machine, or None:
    ``$HETSCHED_LIB_DIR``, then beside the ``hetsched`` binary (a build
    tree's ``deps/``, the installed ``lib/hetsched``, its own folder), as
    ``hetsched run`` looks."""
    dirs = []
    if os.environ.get("HETSCHED_LIB_DIR"):
        dirs.append(Path(os.environ["HETSCHED_LIB_DIR"]))
    exe = binary or os.environ.get("HETSCHED_BIN") or shutil.which("hetsched")
    if exe:
        here = Path(exe).resolve().parent
        dirs += [here / "deps", here.parent / "lib" / "hetsched", here]
    for d in dirs:
        if (d / name).is_file():
            return str(d / name)
    return None


def _prepended(var: str, path: str, sep: str = ":") -> str:
    old = os.environ.get(var, "")
    return path + (sep + old if old else "")


def actor(
    class_: Optional[str] = None,
    shares: Optional[int] = None,
    priority: Optional[int] = None,
    *,
    intercept: bool = True,
    device_memory: Optional[str] = None,
    **ray_options: Any,
) -> Callable[[type], Any]:
    """``@actor(class_="custom", shares=70)`` over a class: a Ray actor
    class whose process runs with that class, shares and priority on every
    unit of its node's daemon. Other keywords are Ray actor options. Inside
    the actor, :func:`runtime` and :func:`client` reach the node's daemon.

    With `intercept` (the default) the actor's own device calls are
    governed too, whatever framework makes them: the OpenCL layer and the
    CUDA interposer go into its environment, as ``hetsched run`` puts
    them, so two actors at 70/30 on one device split its time 70/30.
    `device_memory` (``"2G"``) caps the device memory the actor may hold.
    """
    if class_ is None and priority is None:
        raise ValueError("hetsched.ray.actor needs class_ (with shares) or priority")
    if device_memory is not None and not intercept:
        raise ValueError("device_memory is enforced by the interposers, which intercept=False turns off")
    settings = {"HETSCHED_CLASS": class_, "HETSCHED_SHARES": shares, "HETSCHED_PRIORITY": priority}
    env = {k: str(v) for k, v in settings.items() if v is not None}
    if intercept:
        if device_memory is not None:
            env["HETSCHED_DEVICE_MEMORY"] = str(device_memory)
        # LD_PRELOAD only works from the process's start: through Ray's
        # runtime environment. The OpenCL layer is set at the actor's start
        # on its own node (the ICD loader reads it on first use).
        cuda = interposer(CUDA_INTERPOSER)
        if cuda:
            env["LD_PRELOAD"] = cuda
    options = dict(ray_options)
    runtime_env = dict(options.get("runtime_env") or {})
    runtime_env["env_vars"] = {**env, **(runtime_env.get("env_vars") or {})}
    options["runtime_env"] = runtime_env

    def wrap(cls: type) -> Any:
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            os.environ["HETSCHED_SOCKET"] = socket()
            os.environ.update(env)
            if intercept:
                layer = interposer(OPENCL_LAYER)
                if layer:
                    os.environ["OPENCL_LAYERS"] = _prepended("OPENCL_LAYERS", layer)
            client().set_shares(class_, shares, priority)
            cls.__init__(self, *args, **kwargs)

        wrapped = type(cls.__name__, (cls,), {"__init__": __init__, "__module__": cls.__module__})
        wrapped.__qualname__ = cls.__qualname__
        wrapped.__doc__ = cls.__doc__
        return ray.remote(**options)(wrapped)

    return wrap
