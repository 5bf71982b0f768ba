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

Faults (docs/python.md, "Faults"): a node agent restarts its daemon when
it exits and gives the node's actors their shares back; Ray restarts
agents and executors (an executor whose node is gone, on another node)
and retries the calls whose process died, up to the task's
``max_retries``; the placer offers only the nodes whose agent, daemon and
executor answer, takes in nodes that join, and counts failed calls as in
flight; :func:`shutdown` removes everything, even after a loss.

Ray is imported only when this module is.
"""

from __future__ import annotations

import datetime
import logging
import os
import shutil
import socket as pysocket
import subprocess
import sysconfig
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
from hetsched import _native

NAMESPACE = "hetsched"
_log = logging.getLogger(__name__)
#: How often a driver that places calls refreshes the nodes' summaries, s.
SUMMARY_TTL = 0.05
#: A driver that placed no call for this long stops refreshing them (and
#: reads them afresh when it places one again), s.
PLACER_IDLE = 1.0
#: How long a node agent waits for its daemon to answer, s.
DAEMON_START_TIMEOUT = 30.0
#: A node agent restarts its daemon at once when it exits; when it exits
#: again within :data:`DAEMON_STABLE` s of a start, the agent waits before
#: the next start, from this long, twice as long each time …
DAEMON_BACKOFF_FIRST = 0.1
#: … up to this long, s.
DAEMON_BACKOFF_MAX = 5.0
DAEMON_STABLE = 10.0
#: How often Ray restarts a node's agent or executor whose process died
#: (-1: always); :func:`init` takes another.
MAX_RESTARTS = -1
#: How often a call is retried when the executor running it died, unless
#: its task sets ``max_retries`` (Ray's default for tasks).
MAX_TASK_RETRIES = 3
#: A node whose agent has not answered for this long is not offered for
#: placement until it answers again, s.
AGENT_TIMEOUT = 1.0
#: How often a driver that places calls looks for nodes that joined or
#: left the cluster, s.
NODES_EVERY = 1.0
#: Failed calls count as calls in flight on their node for this long, s
#: (a node whose calls fail at once must not look idle).
FAILURE_MEMORY = 2.0
#: How long :func:`client` waits for its node's daemon to come back, s.
CLIENT_RECONNECT = 10.0
#: How long a call waits for a node to be offered (all daemons
#: restarting) before `.remote()` raises, s.
NODE_WAIT = 10.0
#: How long shutdown() waits for the agents to stop, s.
STOP_TIMEOUT = 10.0
#: An executor that has not answered the placer for this long is
#: restarting: its node is not offered until it answers, s.
EXECUTOR_TIMEOUT = 0.25
#: How often in a row an executor placed away from its (alive) node
#: starts again, hoping for its node.
EXECUTOR_REPLACEMENTS = 8
#: Calls a node's executor runs at once (threads of one Ray actor); the
#: node's daemon, not this number, decides which of them use a unit when.
EXECUTOR_THREADS = 32

NodeConfig = Union[None, str, Mapping[str, str], Callable[[Dict[str, Any]], str]]


def _agent_name(node_id: str) -> str:
    return f"hetsched-node-{node_id}"


def _executor_name(node_id: str) -> str:
    return f"hetsched-exec-{node_id}"


def _installed_binary() -> Optional[str]:
    """`hetsched` on PATH, else the one the wheel installed beside this
    interpreter's scripts (a virtual environment that is not activated)."""
    found = shutil.which("hetsched")
    if found:
        return found
    beside = Path(sysconfig.get_path("scripts")) / "hetsched"
    return str(beside) if os.access(beside, os.X_OK) else None


def _binary(explicit: Optional[str]) -> str:
    path = explicit or os.environ.get("HETSCHED_BIN") or _installed_binary()
    if not path:
        raise hetsched.HetschedError(
            "no hetsched binary for the node daemons: put `hetsched` on PATH, "
            "set HETSCHED_BIN, or pass binary= to hetsched.ray.init()"
        )
    return path


class _NodeAgent:
    """One per Ray node: runs the node's daemon, restarts it when it exits
    (with backoff), and reports its load."""

    def __init__(self, node_id: str, config: str, binary: str, base_dir: str) -> None:
        self.node_id = node_id
        self.binary = binary
        self.work = Path(base_dir) / node_id[:16]
        self.work.mkdir(parents=True, exist_ok=True)
        self.socket_path = str(self.work / "hetsched.sock")
        self.config_path = self.work / "hetsched.toml"
        self.config_path.write_text(f'state_file = "{self.work}/state.json"\n' + config)
        self.log = self.work / "daemon.log"
        self.models: Dict[str, Dict[str, float]] = {}
        #: Class, shares and priority of the node's hetsched actors, by pid:
        #: applied again to every daemon this agent starts.
        self.settings: Dict[int, Tuple[Optional[str], Optional[int], Optional[int]]] = {}
        self.restarts = 0
        self.restarted_at: Optional[float] = None
        self.down_since: Optional[float] = None
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self._wait_for_old_daemon()
        self.daemon = self._spawn()
        self.started_at = time.monotonic()
        self.client = self._connect(self.daemon)
        self.units = self.client.units()
        self.watcher = threading.Thread(target=self._supervise, name="hetsched-ray-daemon", daemon=True)
        self.watcher.start()

    def _wait_for_old_daemon(self) -> None:
        """An agent that Ray restarted: the daemon of the agent that died
        is stopping (its parent-death signal); waits until its socket no
        longer answers, so that the new daemon can take it."""
        deadline = time.monotonic() + DAEMON_START_TIMEOUT
        while os.path.exists(self.socket_path) and time.monotonic() < deadline:
            with pysocket.socket(pysocket.AF_UNIX, pysocket.SOCK_STREAM) as s:
                try:
                    s.connect(self.socket_path)
                except OSError:
                    return  # left behind: the new daemon removes it
            time.sleep(0.05)

    def _spawn(self) -> subprocess.Popen:
        with self.log.open("a") as log:
            return subprocess.Popen(
                # --parent-pid: the daemon stops when this agent dies, even by SIGKILL.
                [self.binary, "daemon", "--config", str(self.config_path), "--socket", self.socket_path]
                + ["--parent-pid", str(os.getpid())],
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def _connect(self, daemon: subprocess.Popen) -> "hetsched.Client":
        deadline = time.monotonic() + DAEMON_START_TIMEOUT
        while True:
            if daemon.poll() is not None:
                raise hetsched.HetschedError(
                    f"the hetsched daemon of node {self.node_id} exited ({daemon.returncode}): "
                    + self.log.read_text()[-2000:]
                )
            try:
                return hetsched.Client("hetsched-ray-node", socket=self.socket_path)
            except hetsched.DaemonUnavailable:
                if time.monotonic() > deadline:
                    daemon.kill()
                    raise
                time.sleep(0.02)

    def _supervise(self) -> None:
        """Restarts the daemon whenever it exits, until :meth:`stop`: at
        once the first time, then waiting twice as long after each exit
        that follows a short run (up to :data:`DAEMON_BACKOFF_MAX`)."""
        wait = 0.0
        while not self.stopping.is_set():
            daemon = self.daemon
            code = daemon.wait()
            if self.stopping.is_set():
                return
            now = time.monotonic()
            with self.lock:
                self.down_since = self.down_since or now
            if now - self.started_at >= DAEMON_STABLE:
                wait = 0.0
            _log.warning(
                "hetsched.ray: the daemon of node %s exited (%s) after %.1f s; restarting it in %.2f s",
                self.node_id, code, now - self.started_at, wait,
            )
            if self.stopping.wait(wait):
                return
            wait = min(DAEMON_BACKOFF_MAX, max(DAEMON_BACKOFF_FIRST, 2 * wait))
            self._log_line(f"the daemon exited ({code}); restart {self.restarts + 1}")
            self.started_at = time.monotonic()
            try:
                self._restart()
            except Exception as e:  # it exited again, or never answered: back off
                _log.warning("hetsched.ray: restarting the daemon of node %s failed: %s", self.node_id, e)
                if self.daemon.poll() is None:
                    self.daemon.kill()  # up but not taken in: start it again

    def _restart(self) -> None:
        """Starts the daemon again, gives the node's actors their shares
        back, and offers the node again."""
        self.daemon = self._spawn()
        client = self._connect(self.daemon)
        self._reapply(client)
        units = client.units()
        with self.lock:
            self.client, self.units = client, units
            self.restarts += 1
            self.restarted_at = time.time()
            down_for = time.monotonic() - (self.down_since or time.monotonic())
            self.down_since = None
        _log.warning(
            "hetsched.ray: the daemon of node %s is back (restart %d, pid %d, down %.2f s)",
            self.node_id, self.restarts, self.daemon.pid, down_for,
        )
        self._log_line(f"the daemon is back (pid {self.daemon.pid}, down {down_for:.3f} s)")

    def _log_line(self, text: str) -> None:
        """A line of the agent's in the daemon's log, timed as the daemon's are."""
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        with self.log.open("a") as log:
            log.write(f"{now} hetsched.ray: {text}\n")

    def _reapply(self, client: "hetsched.Client") -> None:
        """Gives the node's live hetsched actors their class and shares on
        a restarted daemon (those that have exited are forgotten)."""
        with self.lock:
            settings = dict(self.settings)
        for pid, (class_, shares, priority) in settings.items():
            if not _alive(pid):
                with self.lock:
                    self.settings.pop(pid, None)
                continue
            try:
                client.set_shares(class_, shares, priority, pid=pid)
            except hetsched.HetschedError as e:
                _log.warning("hetsched.ray: cannot give process %d its shares back: %s", pid, e)

    def keep_settings(self, pid: int, class_: Optional[str], shares: Optional[int], priority: Optional[int]) -> None:
        """Records an actor's class and shares, applied again after a
        daemon restart."""
        with self.lock:
            self.settings[pid] = (class_, shares, priority)

    def socket(self) -> str:
        return self.socket_path

    def daemon_state(self) -> Dict[str, Any]:
        """Whether the daemon is up, its pid, and how often it was restarted."""
        with self.lock:
            daemon, down_since = self.daemon, self.down_since
            state = {"pid": daemon.pid, "restarts": self.restarts, "restarted_at": self.restarted_at}
        up = down_since is None and daemon.poll() is None
        state["up"] = up
        state["down_for"] = 0.0 if up else time.monotonic() - (down_since or time.monotonic())
        return state

    def summary(self) -> Dict[str, Any]:
        """The node's daemon state, units and their load now, and the
        learned times. A node whose daemon is down lists no units."""
        state = self.daemon_state()
        units = []
        if state["up"]:
            with self.lock:
                client, infos = self.client, self.units
            for u in infos:
                v = client.view(u.name)
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
        return {"node_id": self.node_id, "daemon": state, "units": units, "models": self.models}

    def learn(self, task: str, times: Dict[str, Optional[float]]) -> None:
        """A worker's model of `task`: seconds per kind (None: not known)."""
        known = {k: t for k, t in times.items() if t is not None}
        self.models.setdefault(task, {}).update(known)

    def status(self) -> Dict[str, Any]:
        with self.lock:
            client = self.client
        if not self.daemon_state()["up"]:
            raise hetsched.DaemonUnavailable(f"the hetsched daemon of node {self.node_id} is restarting")
        return client.status()

    def stop(self) -> None:
        """Stops the daemon (and its supervision) and removes the node's folder."""
        self.stopping.set()
        with self.lock:
            daemon = self.daemon
        _terminate(daemon)
        self.watcher.join(timeout=DAEMON_START_TIMEOUT)
        with self.lock:
            latest, client = self.daemon, self.client
        if latest is not daemon:  # started while stop() began
            _terminate(latest)
        client.close()
        shutil.rmtree(self.work, ignore_errors=True)


def _terminate(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class _NodeExecutor:
    """One per Ray node: a threaded actor that runs the calls of hetsched
    tasks through the node's :class:`hetsched.Runtime`. A call is then an
    actor call (no worker lease, no worker process per concurrent call),
    and up to :data:`EXECUTOR_THREADS` calls wait on the node's units at
    once: the node's daemon orders them, and the runtime waits without the
    GIL.

    It is placed on its node with a soft affinity, so that when the node
    is gone Ray restarts it on another, where the calls it held are
    retried. Ray takes a soft affinity as a preference only, so while its
    node is alive an executor that finds itself elsewhere (a node without
    Ray's `memory` resource, of which it asks one byte) exits at once
    (before it ran any call) and Ray starts it again, up to
    :data:`EXECUTOR_REPLACEMENTS` times in a row."""

    def __init__(self, node_id: str) -> None:
        here = ray.get_runtime_context().get_node_id()
        key = f"executor-moves/{node_id}"
        if here != node_id and _node_alive(node_id):
            moves = int(_internal_kv_get(key, namespace=NAMESPACE) or 0)
            if moves < EXECUTOR_REPLACEMENTS:
                _internal_kv_put(key, str(moves + 1).encode(), namespace=NAMESPACE)
                _log.warning("hetsched.ray: the executor of node %s started on node %s; starting it again", node_id, here)
                os._exit(1)
            _log.warning(
                "hetsched.ray: the executor of node %s runs on node %s (Ray placed it there %d times)",
                node_id, here, moves,
            )
        _internal_kv_put(key, b"0", namespace=NAMESPACE)
        self.node_id = here

    def ready(self) -> int:
        runtime()
        return os.getpid()

    @ray.method(concurrency_group="control")
    def node(self) -> str:
        """The node this executor runs on (answered even while every
        thread runs a call: the placer asks it to know the executor is up)."""
        return self.node_id

    def run(self, spec_key: str, *args: Any) -> Any:
        return _run_task(spec_key, *args)


def _node_alive(node_id: str) -> bool:
    return any(n["NodeID"] == node_id and n.get("Alive") for n in ray.nodes())


_state_lock = threading.Lock()
_agents: Dict[str, Any] = {}
_executors: Dict[str, Any] = {}
#: Executors of nodes that left the cluster: Ray restarts them on another
#: node to finish the calls they held. Killed by shutdown().
_retired: List[Any] = []
#: Folders init() made for the daemons, removed by shutdown().
_made_dirs: List[str] = []
#: What a call to an agent raises when it cannot answer: dead, restarting,
#: its node gone (unschedulable), or failing.
_AGENT_GONE = ray.exceptions.RayError


class _Settings:
    """What :func:`init` was given: nodes that join later start with it."""

    def __init__(
        self,
        config: NodeConfig,
        binary: str,
        base: str,
        executor_threads: int,
        max_restarts: int,
        max_task_retries: int,
    ) -> None:
        self.config = config
        self.binary = binary
        self.base = base
        self.max_restarts = max_restarts
        self.max_task_retries = max_task_retries
        self.agent_cls = ray.remote(num_cpus=0, max_restarts=max_restarts, max_task_retries=max_task_retries)(
            _NodeAgent
        )
        self.exec_cls = ray.remote(
            num_cpus=0,
            # Ray places an actor that asks for no resource on any node,
            # whatever its soft affinity: one byte of memory makes it count.
            memory=1,
            max_concurrency=executor_threads,
            concurrency_groups={"control": 1},
            max_restarts=max_restarts,
            max_task_retries=max_task_retries,
        )(_NodeExecutor)

    def start_node(self, node: Dict[str, Any]) -> Tuple[Any, Any, List[Any]]:
        """Starts `node`'s agent (its daemon) and executor; returns them and
        the calls that answer once both are up."""
        nid = node["NodeID"]
        agent = self.agent_cls.options(
            name=_agent_name(nid),
            namespace=NAMESPACE,
            # The agent runs this node's daemon: it restarts here or nowhere.
            scheduling_strategy=NodeAffinitySchedulingStrategy(nid, soft=False),
        ).remote(nid, _config_for(node, self.config), self.binary, self.base)
        executor = self.exec_cls.options(
            name=_executor_name(nid),
            namespace=NAMESPACE,
            # Soft: when the node is gone, Ray restarts the executor on
            # another node, where the calls it held are retried.
            scheduling_strategy=NodeAffinitySchedulingStrategy(nid, soft=True),
        ).remote(nid)
        return agent, executor, [agent.socket.remote(), executor.ready.remote()]


_settings: Optional[_Settings] = None


def _config_for(node: Dict[str, Any], config: NodeConfig) -> str:
    if config is None:
        return ""
    if isinstance(config, str):
        return config
    if callable(config):
        return config(node)
    return config.get(node["NodeID"], "")


def _check_count(name: str, value: int, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{name} must be an integer >= {least} (-1: without limit), not {value!r}")
    return value


def init(
    config: NodeConfig = None,
    *,
    binary: Optional[str] = None,
    base_dir: Optional[str] = None,
    executor_threads: int = EXECUTOR_THREADS,
    max_restarts: int = MAX_RESTARTS,
    max_task_retries: int = MAX_TASK_RETRIES,
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
    options. Nodes that join the cluster later get theirs (with the
    latest call's settings) while the driver places calls; calling
    init() again starts the nodes that have none yet.

    Faults: each node's agent restarts its daemon when it exits. Ray
    restarts an agent or an executor whose process died up to
    `max_restarts` times (-1: always); an executor whose node is gone is
    restarted on another node. `max_task_retries` is how often a call of a
    task that does not set ``max_retries`` is retried when the executor
    running it died (-1: until it succeeds; Ray's tasks retry 3 times).
    """
    if executor_threads < 1:
        raise ValueError(f"executor_threads must be at least 1, not {executor_threads}")
    _check_count("max_restarts", max_restarts, -1)
    _check_count("max_task_retries", max_task_retries, -1)
    if not ray.is_initialized():
        raise hetsched.HetschedError("call ray.init() before hetsched.ray.init()")
    global _settings
    exe = _binary(binary)
    started: Dict[str, Tuple[Any, Any, List[Any]]] = {}
    with _state_lock:
        fresh = _settings is None
        base = base_dir or (None if fresh else _settings.base)
        if base is None:
            base = tempfile.mkdtemp(prefix="hetsched-ray-")
            _made_dirs.append(base)
        # The latest call's settings also go to the nodes that join later.
        settings = _settings = _Settings(config, exe, base, executor_threads, max_restarts, max_task_retries)
    try:
        with _state_lock:
            for node in ray.nodes():
                nid = node["NodeID"]
                if node.get("Alive") and nid not in _agents and nid not in _placer.joining:
                    started[nid] = settings.start_node(node)
        ray.get([ref for _, _, refs in started.values() for ref in refs])
        with _state_lock:
            for nid, (agent, executor, _) in started.items():
                _agents[nid] = agent
                _executors[nid] = executor
            agents = dict(_agents)
        sockets = ray.get([a.socket.remote() for a in agents.values()])
        _placer.start()
    except BaseException:
        # Nothing half-started stays behind: the actors, daemons and folders go.
        for agent, executor, _ in started.values():
            _kill(executor)
            _kill(agent)
        if fresh:
            shutdown()
        raise
    return dict(zip(agents, sockets))


def _kill(actor: Any) -> None:
    try:
        ray.kill(actor, no_restart=True)
    except Exception as e:  # already gone, or Ray shutting down
        _log.debug("hetsched.ray: killing %s: %s", actor, e)


def _wait_names_free(names: List[str], timeout: float) -> None:
    """Waits until no actor holds one of `names` (ray.kill is asynchronous),
    so that a following init() can take them again."""
    deadline = time.monotonic() + timeout
    for name in names:
        while time.monotonic() < deadline:
            try:
                ray.get_actor(name, namespace=NAMESPACE)
            except ValueError:
                break
            time.sleep(0.02)


def shutdown() -> None:
    """Stops every node daemon, agent and executor started by :func:`init`
    (also those of nodes that failed), and removes the folders it made."""
    global _settings
    _placer.stop()
    with _state_lock:
        agents = dict(_agents)
        executors = list(_executors.values()) + _retired
        _agents.clear()
        _executors.clear()
        _retired.clear()
        _settings = None
    try:
        # Without Ray (shut down first) the actors and daemons are gone with it.
        if ray.is_initialized():
            for e in executors:
                _kill(e)
            stops = [a.stop.remote() for a in agents.values()]
            ready, _ = ray.wait(stops, num_returns=len(stops), timeout=STOP_TIMEOUT)
            for ref in ready:
                try:
                    ray.get(ref)
                except Exception as e:  # its node is gone; the daemon went with it
                    _log.info("hetsched.ray: stopping a node agent: %s", e)
    finally:
        if ray.is_initialized():
            for a in agents.values():
                _kill(a)
            names = [_agent_name(n) for n in agents] + [_executor_name(n) for n in agents]
            _wait_names_free(names, STOP_TIMEOUT)
        while _made_dirs:
            shutil.rmtree(_made_dirs.pop(), ignore_errors=True)


def nodes() -> Dict[str, Dict[str, Any]]:
    """Every node's summary now: ``{node_id: {"daemon": {...}, "units":
    [...], "models": {...}}}``. Nodes whose agent does not answer within
    :data:`AGENT_TIMEOUT` are left out."""
    with _state_lock:
        agents = dict(_agents)
    refs = {a.summary.remote(): nid for nid, a in agents.items()}
    ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=AGENT_TIMEOUT)
    out = {}
    for ref in ready:
        try:
            out[refs[ref]] = ray.get(ref)
        except _AGENT_GONE:
            continue
    return out


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


def client() -> "NodeClient":
    """This Ray worker's :class:`NodeClient` on its node's daemon."""
    return _once_per_worker("client", lambda path: NodeClient(f"ray-{os.getpid()}", path))


class NodeClient:
    """A :class:`hetsched.Client` on a node's daemon that survives the
    daemon's restarts (what :func:`client` returns in a Ray worker).

    It has the methods of :class:`hetsched.Client`. When the daemon it
    talks to is gone, the next call connects to the restarted one (waiting
    up to :data:`CLIENT_RECONNECT`), gives this process again the class and
    shares it set with :meth:`set_shares`, and makes the call there. Calls
    that only read or ask (``units``, ``view``, ``status``,
    ``set_shares``, ``request_dispatch``) are made again when the daemon
    dies under them; a grant from a daemon that died is void, and
    ``task_completed`` on it does nothing.
    """

    _RETRIED = frozenset({"units", "view", "status", "set_shares", "request_dispatch"})

    def __init__(self, name: str, socket_path: str) -> None:
        self._name = name
        self._socket = socket_path
        self._lock = threading.Lock()
        self._client = hetsched.Client(name, socket=socket_path)
        #: This process's own class, shares and priority, to set again.
        self._settings: Optional[Tuple[Optional[str], Optional[int], Optional[int]]] = None
        #: Grants given, with the connection that got them (by id(grant)).
        self._grants: Dict[int, Tuple[Any, "hetsched.Client"]] = {}
        self.reconnects = 0

    def _current(self) -> "hetsched.Client":
        with self._lock:
            c = self._client
        if not _alive(c.daemon_pid):
            c = self._reconnect(c)
        return c

    def _reconnect(self, old: "hetsched.Client") -> "hetsched.Client":
        with self._lock:
            if self._client is not old:  # another thread did it
                return self._client
            deadline = time.monotonic() + CLIENT_RECONNECT
            while True:
                try:
                    c = hetsched.Client(self._name, socket=self._socket)
                    if _alive(c.daemon_pid):
                        break
                except hetsched.DaemonUnavailable:
                    if time.monotonic() > deadline:
                        raise
                time.sleep(0.05)
            old.close()
            self._client = c
            self.reconnects += 1
            settings = self._settings
        if settings is not None:
            c.set_shares(*settings)
        return c

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        c = self._current()
        try:
            return getattr(c, method)(*args, **kwargs)
        except hetsched.DaemonUnavailable:
            if method not in self._RETRIED:
                raise
            return getattr(self._reconnect(c), method)(*args, **kwargs)

    @property
    def pid(self) -> int:
        return self._current().pid

    @property
    def daemon_pid(self) -> int:
        return self._current().daemon_pid

    def units(self) -> List["hetsched.Unit"]:
        return self._call("units")

    def view(self, unit: str) -> Dict[str, Any]:
        return self._call("view", unit)

    def status(self) -> Dict[str, Any]:
        return self._call("status")

    def set_shares(
        self,
        class_: Optional[str] = None,
        shares: Optional[int] = None,
        priority: Optional[int] = None,
        *,
        pid: Optional[int] = None,
        unit: Optional[str] = None,
    ) -> Dict[str, Any]:
        out = self._call("set_shares", class_, shares, priority, pid=pid, unit=unit)
        if pid is None and unit is None:
            self._settings = (class_, shares, priority)
        return out

    def request_dispatch(self, unit: str, expected_ns: int = 0) -> "hetsched.Grant":
        c = self._current()
        try:
            grant = c.request_dispatch(unit, expected_ns)
        except hetsched.DaemonUnavailable:
            c = self._reconnect(c)
            grant = c.request_dispatch(unit, expected_ns)
        with self._lock:
            self._grants[id(grant)] = (grant, c)
        return grant

    def task_completed(self, grant: "hetsched.Grant", ran_ns: int) -> None:
        with self._lock:
            _, c = self._grants.pop(id(grant), (grant, self._client))
            current = self._client
        if c is not current:
            return  # its daemon died, and the slot with it
        try:
            c.task_completed(grant, ran_ns)
        except hetsched.DaemonUnavailable:
            pass  # the daemon died while the work ran: the slot went with it

    def dispatch(self, unit: str, expected_ns: int = 0) -> "hetsched.Dispatch":
        """The unit's gate as a context manager (:meth:`hetsched.Client.dispatch`)."""
        return hetsched.Dispatch(self, unit, expected_ns)  # type: ignore[arg-type]

    def close(self) -> None:
        with self._lock:
            self._client.close()

    def __enter__(self) -> "NodeClient":
        return self

    def __exit__(self, *_exc: Any) -> None:
        self.close()


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


def _able(kinds: List[str], units: List[Dict[str, Any]]) -> bool:
    """Whether one of `units` has an implementation among `kinds`."""
    return any(_implements(kinds, u) for u in units)


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
    s): the sum of :func:`unit_rate` over the implemented units, each
    serving ``slots / (exec × (1 + backlog / slots))``; CPU kinds are
    slowed by the runnable threads beyond their cores. A device kind not measured yet is estimated from a measured one
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
        rate += unit_rate(u, t)
    return rate


def unit_rate(unit: Dict[str, Any], exec_s: float) -> float:
    """Calls per second `unit` (an entry of a node's summary) finishes of a
    task that runs `exec_s` there alone (at least 1 µs): the core's
    placement formula (``hetsched_core::turnaround::turnaround``, through
    ``hetsched._native.turnaround``), ``slots / (exec × stretch)``, the
    stretch from the unit's runnable threads on a CPU kind and from its
    backlog (tasks queued and running) on a device. 0.0 for an infinite
    length."""
    if unit["class"] == "cpu":
        load = {"runnable_threads": float(unit["runnable"])}
    else:
        load = {"backlog": float(unit["backlog"])}
    # The one placement formula: hetsched_core::turnaround::turnaround.
    t = _native.turnaround(max(exec_s, 1e-6) * 1e9, max(1, unit["slots"]), **load)
    # No figure for a length that is not finite: such a unit finishes none.
    return 0.0 if t is None else t["rate_per_s"]


def choose_node(
    name: str, kinds: List[str], summaries: Dict[str, Dict[str, Any]], waiting: Dict[str, int]
) -> str:
    """The node where a call of task `name` (implementations `kinds`)
    should finish soonest: the smallest ``(waiting + 1) / node_rate`` over
    the nodes offered (`summaries`), `waiting` being the calls this driver
    has in flight on each (and those that failed lately). A node with a
    unit whose time is not known yet gets one call at a time until it is.
    Raises when no node has a unit for the task."""
    times: Dict[str, float] = {}
    speeds: Dict[str, float] = {}
    for x in summaries.values():
        times.update(x["models"].get(name, {}))
        speeds.update((u["kind"], u["speed"]) for u in x["units"])
    best, best_t = None, float("inf")
    able = []
    for nid, s in summaries.items():
        w = waiting.get(nid, 0)
        rate = node_rate(kinds, times, s, speeds)
        if rate != 0.0:
            able.append(nid)
        if rate is None:
            # An untried unit: one call at a time until it is known.
            t = 0.0 if w == 0 else float("inf")
        elif rate <= 0.0:
            continue
        else:
            t = (w + 1) / rate
        if t < best_t:
            best, best_t = nid, t
    if best is None:
        if not able:
            raise hetsched.HetschedError(
                f"task {name}: no Ray node has a unit for its implementations ({', '.join(kinds)})"
            )
        # Every able node is being tried: the one with the fewest in flight.
        best = min(able, key=lambda n: waiting.get(n, 0))
    return best


class _Placer:
    """The driver's view of the nodes: their summaries and the calls it has
    in flight on each, kept fresh by a thread of its own (every
    :data:`SUMMARY_TTL`), so that choosing a node never waits on Ray.

    A node is offered for placement while its agent answers (within
    :data:`AGENT_TIMEOUT`) and its daemon is up. The thread also takes in
    nodes that join the cluster and lets go of those that leave (every
    :data:`NODES_EVERY`)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        #: One refresh at a time (the thread's, or a call's after idling).
        self.refresh_lock = threading.Lock()
        #: The latest summary of each node and when it came (monotonic s).
        self.summaries: Dict[str, Dict[str, Any]] = {}
        self.answered_at: Dict[str, float] = {}
        #: Each node's units as last seen (a node whose daemon is down lists none).
        self.units_seen: Dict[str, List[Dict[str, Any]]] = {}
        #: The summary request outstanding per node, and when it was sent.
        self.asked: Dict[str, Tuple[Any, float]] = {}
        #: The same for each node's executor (it answers unless it is
        #: restarting), and the nodes whose executor's last answer was an error.
        self.pinged: Dict[str, Tuple[Any, float]] = {}
        self.executor_failed: set = set()
        self.refreshed_at = 0.0
        self.chosen_at = 0.0
        self.nodes_checked_at = 0.0
        #: Ticks of the thread that found the driver idle (for tests).
        self.idle_ticks = 0
        self.inflight: Dict[str, List[Any]] = {}
        #: When calls placed on each node failed (the last FAILURE_MEMORY s).
        self.failures: Dict[str, List[float]] = {}
        #: Nodes whose agent and executor are starting: (agent, executor, calls that answer when up).
        self.joining: Dict[str, Tuple[Any, Any, List[Any]]] = {}
        #: Nodes that could not be taken in (not tried again).
        self.refused: set = set()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._failing = False

    def start(self) -> None:
        """Reads the summaries once, then keeps them fresh until :meth:`stop`."""
        self._refresh(wait=True)
        if self._thread is None:
            self._stop.clear()
            # A daemon thread so that a driver that never calls shutdown()
            # can still exit; shutdown() stops and joins it.
            self._thread = threading.Thread(target=self._loop, name="hetsched-ray-placer", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stops the refreshing thread and forgets the nodes (killing those
        still joining)."""
        thread, self._thread = self._thread, None
        if thread is not None:
            self._stop.set()
            thread.join()
        with self.refresh_lock, self.lock:
            joining = list(self.joining.values())
            self.summaries, self.answered_at, self.asked, self.pinged = {}, {}, {}, {}
            self.units_seen = {}
            self.executor_failed = set()
            self.inflight, self.failures, self.joining, self.refused = {}, {}, {}, set()
            self.refreshed_at = self.nodes_checked_at = 0.0
        for agent, executor, _ in joining:
            _kill(executor)
            _kill(agent)

    def _loop(self) -> None:
        while not self._stop.wait(SUMMARY_TTL):
            with self.lock:
                idle = time.monotonic() - self.chosen_at > PLACER_IDLE
            if idle:
                self.idle_ticks += 1
                continue
            try:
                self._refresh(wait=False)
                if time.monotonic() - self.nodes_checked_at >= NODES_EVERY:
                    self._check_nodes()
                self._failing = False
            except Exception as e:  # Ray shutting down
                if not self._failing:
                    _log.warning("hetsched.ray: cannot refresh the nodes' summaries: %s", e)
                self._failing = True

    def _refresh(self, wait: bool) -> None:
        """Collects the summaries that came, asks every agent that has no
        request outstanding again (with `wait`: waits up to
        :data:`AGENT_TIMEOUT` for them), and forgets finished calls."""
        with self.refresh_lock:
            with _state_lock:
                agents = dict(_agents)
                executors = dict(_executors)
            got = self._collect(self.asked, agents, "summary", wait)
            pongs = self._collect(self.pinged, executors, "node", False)
            for nid, answer in pongs.items():
                if answer is None:
                    self.executor_failed.add(nid)
                else:
                    self.executor_failed.discard(nid)
            finished, failed = self._finished_calls()
            now = time.monotonic()
            with self.lock:
                for nid, summary in got.items():
                    if summary is None:  # not offered until the agent answers
                        self.answered_at[nid] = 0.0
                        continue
                    self.summaries[nid] = summary
                    self.answered_at[nid] = now
                    if summary["units"]:
                        self.units_seen[nid] = summary["units"]
                for nid in list(self.summaries):
                    if nid not in agents:
                        del self.summaries[nid]
                        self.answered_at.pop(nid, None)
                self.refreshed_at = now
                for nid, refs in self.inflight.items():
                    self.inflight[nid] = [r for r in refs if r not in finished]
                for nid, n in failed.items():
                    self.failures.setdefault(nid, []).extend([now] * n)
                for nid, times in self.failures.items():
                    self.failures[nid] = [t for t in times if now - t < FAILURE_MEMORY]

    @staticmethod
    def _collect(
        asked: Dict[str, Tuple[Any, float]], actors: Dict[str, Any], method: str, wait: bool
    ) -> Dict[str, Optional[Any]]:
        """Asks each of `actors` that has no request outstanding in `asked`
        to run `method`; returns the answers that came ({node: answer},
        None for an error), waiting up to AGENT_TIMEOUT with `wait`."""
        now = time.monotonic()
        for nid in list(asked):
            if nid not in actors:
                del asked[nid]
        for nid, actor in actors.items():
            if nid not in asked:
                asked[nid] = (getattr(actor, method).remote(), now)
        refs = {ref: nid for nid, (ref, _) in asked.items()}
        ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=AGENT_TIMEOUT if wait else 0)
        got: Dict[str, Optional[Any]] = {}
        for ref in ready:
            nid = refs[ref]
            del asked[nid]
            try:
                got[nid] = ray.get(ref)
            except _AGENT_GONE as e:
                # Restarting, or its node is gone.
                _log.debug("hetsched.ray: %s of node %s failed: %s", method, nid, e)
                got[nid] = None
        return got

    def _finished_calls(self) -> Tuple[set, Dict[str, int]]:
        """The calls in flight that finished, and how many failed per node."""
        with self.lock:
            snapshot = {nid: list(refs) for nid, refs in self.inflight.items() if refs}
        finished: set = set()
        failed: Dict[str, int] = {}
        for nid, refs in snapshot.items():
            done, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
            if not done:
                continue
            finished.update(done)
            try:
                ray.get(done, timeout=0)  # one call when none failed (the usual case)
                continue
            except Exception:
                pass
            for ref in done:
                try:
                    ray.get(ref, timeout=0)
                except ray.exceptions.GetTimeoutError:
                    pass  # not here yet: it did not fail
                except Exception:
                    failed[nid] = failed.get(nid, 0) + 1
        return finished, failed

    def _check_nodes(self) -> None:
        """Lets go of nodes that left the cluster, starts an agent and an
        executor on nodes that joined, and takes in those that are up."""
        self.nodes_checked_at = time.monotonic()
        alive = {n["NodeID"]: n for n in ray.nodes() if n.get("Alive")}
        with _state_lock:
            settings = _settings
            gone = [nid for nid in _agents if nid not in alive]
            for nid in gone:
                del _agents[nid]
                executor = _executors.pop(nid, None)
                if executor is not None:
                    _retired.append(executor)
            new = [n for nid, n in alive.items() if nid not in _agents]
        for nid in gone:
            _log.warning("hetsched.ray: node %s left the cluster; placing on the others", nid)
        if settings is None:
            return
        for node in new:
            nid = node["NodeID"]
            if nid in self.joining or nid in self.refused:
                continue
            try:
                self.joining[nid] = settings.start_node(node)
            except Exception as e:
                _log.warning("hetsched.ray: cannot start hetsched on node %s: %s", nid, e)
                self.refused.add(nid)
        for nid, (agent, executor, refs) in list(self.joining.items()):
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
            if len(ready) < len(refs) and nid in alive:
                continue
            del self.joining[nid]
            try:
                ray.get(refs, timeout=0)
            except Exception as e:
                _log.warning("hetsched.ray: node %s could not be taken in: %s", nid, e)
                self.refused.add(nid)
                _kill(executor)
                _kill(agent)
                continue
            with _state_lock:
                if _settings is None:  # shut down meanwhile
                    _kill(executor)
                    _kill(agent)
                    continue
                _agents[nid] = agent
                _executors[nid] = executor
            _log.info("hetsched.ray: node %s joined the cluster; placing on it too", nid)

    def _may_come_back(self, kinds: List[str], offered: Dict[str, Any]) -> bool:
        """Whether a node not offered now had a unit for `kinds` (or has
        not been seen with its units yet)."""
        with _state_lock:
            agents = list(_agents)
        with self.lock:
            return any(
                nid not in self.units_seen or _able(kinds, self.units_seen[nid])
                for nid in agents
                if nid not in offered
            )

    def offered(self) -> Dict[str, Dict[str, Any]]:
        """The nodes offered for placement now, with their summaries: their
        agent answered within AGENT_TIMEOUT, their daemon is up, and their
        executor is not restarting (it answers within EXECUTOR_TIMEOUT)."""
        now = time.monotonic()
        with self.lock:
            return {
                nid: s
                for nid, s in self.summaries.items()
                if s.get("daemon", {}).get("up", True)
                and now - self.answered_at.get(nid, 0.0) <= AGENT_TIMEOUT
                and nid not in self.executor_failed
                and now - self.pinged.get(nid, (None, now))[1] <= EXECUTOR_TIMEOUT
            }

    def choose(self, name: str, kinds: List[str]) -> str:
        now = time.monotonic()
        with self.lock:
            stale = now - self.refreshed_at > PLACER_IDLE
            self.chosen_at = now
        if stale:
            self._refresh(wait=True)
        deadline = now + NODE_WAIT
        while True:
            offered = self.offered()
            if any(_able(kinds, s["units"]) for s in offered.values()):
                break
            if offered and not self._may_come_back(kinds, offered):
                break  # choose_node says that no node can run it
            with _state_lock:
                if not _agents:
                    raise hetsched.HetschedError("no node runs a hetsched daemon: call hetsched.ray.init()")
            if time.monotonic() > deadline:
                raise hetsched.HetschedError(
                    f"task {name}: no node that can run it has been offered for {NODE_WAIT:.0f} s "
                    "(daemons or executors restarting, or agents not answering)"
                )
            time.sleep(SUMMARY_TTL)  # restarting: ask again shortly
            self._refresh(wait=True)
        with self.lock:
            # Calls that failed lately count as in flight: a node whose
            # calls fail at once does not look idle.
            waiting = {
                nid: len(self.inflight.get(nid, ())) + len(self.failures.get(nid, ())) for nid in offered
            }
        return choose_node(name, kinds, offered, waiting)

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
        self._set_options(options)

    def _set_options(self, options: Dict[str, Any]) -> None:
        retries = options.get("max_retries")
        if retries is not None:
            _check_count("max_retries", retries, -1)
        self._options = options
        #: Ray options other than max_retries: the call is then a Ray task.
        self._ray_options = {k: v for k, v in options.items() if k != "max_retries"}
        self._max_retries = retries
        # The remote function (or executor method) with its options, per
        # node (`.options()` is not free, and a node's options never change).
        self._by_node: Dict[str, Any] = {}

    def options(self, **ray_options: Any) -> "RemoteTask":
        """The same task with other Ray options (``num_cpus``, ``max_retries`` …)."""
        t = RemoteTask.__new__(RemoteTask)
        t.__dict__.update(self.__dict__)
        t._set_options({**self._options, **ray_options})
        return t

    def remote(self, *args: Any) -> Any:
        """Submits one call; returns its Ray ``ObjectRef``."""
        if not self._stored:
            _internal_kv_put(self._spec_key, cloudpickle.dumps(self._spec), namespace=NAMESPACE)
            self._stored = True
        for _ in range(3):
            nid = _placer.choose(self.name, self.kinds)
            fn = self._submitter(nid)
            if fn is None:  # the node left since the placer saw it
                _placer._refresh(wait=False)
                continue
            ref = fn.remote(self._spec_key, *args)
            _placer.sent(nid, ref)
            return ref
        raise hetsched.HetschedError(f"task {self.name}: the nodes chosen for it kept leaving the cluster")

    def _submitter(self, nid: str) -> Any:
        """What submits a call on `nid`: a Ray task pinned there (soft: when
        the node is gone, Ray retries it on another), or the node's
        executor's method; None when the node has no executor."""
        if self._ray_options:
            fn = self._by_node.get(nid)
            if fn is None:
                opts = dict(self._ray_options)
                if self._max_retries is not None:
                    opts["max_retries"] = self._max_retries
                fn = self._by_node[nid] = _remote_body().options(
                    scheduling_strategy=NodeAffinitySchedulingStrategy(nid, soft=True), **opts
                )
            return fn
        with _state_lock:
            executor = _executors.get(nid)
        if executor is None:
            return None
        if self._max_retries is None:
            return executor.run
        cached = self._by_node.get(nid)
        if cached is None or cached[0] is not executor:  # a new init() made new executors
            cached = self._by_node[nid] = (executor, executor.run.options(max_task_retries=self._max_retries))
        return cached[1]


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
    threads). Other keywords are Ray task options (``num_cpus`` …): the
    call is then a plain Ray task pinned to the chosen node, and Ray holds
    the resources it asks for while it runs.

    ``max_retries`` (Ray's meaning, 3 by default; -1: without limit) is how
    often a call is made again, on another node when its node is gone, when
    the process running it died (executor, worker or node lost). An
    exception raised by the implementation is never retried. Give
    ``max_retries=0`` to a task whose calls must not run twice."""
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
    exe = binary or os.environ.get("HETSCHED_BIN") or _installed_binary()
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
            # Given again by the node agent to every daemon it restarts.
            _node_agent().keep_settings.remote(os.getpid(), class_, shares, priority)
            cls.__init__(self, *args, **kwargs)

        wrapped = type(cls.__name__, (cls,), {"__init__": __init__, "__module__": cls.__module__})
        wrapped.__qualname__ = cls.__qualname__
        wrapped.__doc__ = cls.__doc__
        return ray.remote(**options)(wrapped)

    return wrap
