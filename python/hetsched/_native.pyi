"""Type stubs of hetsched's native module (python/src/*.rs)."""

from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

__version__: str

class HetschedError(Exception):
    """Base class of every error hetsched raises."""

class DaemonUnavailable(HetschedError):
    """No hetsched daemon answers on the socket (not started, wrong socket, untrusted)."""

class DaemonError(HetschedError):
    """The daemon refused a request or broke the protocol; the message says why."""

class TaskFailed(HetschedError):
    """A task could not run, or its implementation panicked or failed on its device."""

class UnknownUnit(HetschedError, LookupError):
    """No unit of that name (the message lists the units there are)."""

class Unit:
    """A processing unit: a CPU kind, a GPU, an accelerator or an emulated device."""

    @property
    def id(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def unit_class(self) -> str:
        """``"cpu"``, ``"gpu"``, ``"accelerator"`` or ``"emulated"``."""
    @property
    def policy(self) -> str: ...
    @property
    def slots(self) -> int: ...
    @property
    def relative_speed(self) -> float: ...
    @property
    def emulated(self) -> bool: ...
    @property
    def kernels(self) -> List[str]: ...

class Grant:
    """A slot a unit's agent granted (``Client.request_dispatch``)."""

    @property
    def unit(self) -> str: ...
    @property
    def task(self) -> int: ...
    @property
    def waited_ns(self) -> int: ...

class Client:
    """A connection to the hetsched daemon (``hetsched.Client`` adds ``dispatch()``)."""

    def __init__(self, name: str = "python", socket: Optional[str] = None, observer: bool = False) -> None: ...
    @property
    def pid(self) -> int: ...
    @property
    def daemon_pid(self) -> int: ...
    def units(self) -> List[Unit]: ...
    def view(self, unit: str) -> Dict[str, Any]:
        """What this process can expect from ``unit`` now, from the shared pages."""
    def status(self) -> Dict[str, Any]:
        """The data ``hetsched status --json`` prints."""
    def set_shares(
        self,
        class_: Optional[str] = None,
        shares: Optional[int] = None,
        priority: Optional[int] = None,
        *,
        pid: Optional[int] = None,
        unit: Optional[str] = None,
    ) -> Dict[str, Any]: ...
    def request_dispatch(self, unit: str, expected_ns: int = 0) -> Grant:
        """Waits (GIL released) until ``unit``'s agent grants a slot."""
    def task_completed(self, grant: Grant, ran_ns: int) -> None: ...
    def close(self) -> None: ...
    def __enter__(self) -> "Client": ...
    def __exit__(self, *exc: Any) -> None: ...

_Impl = Callable[..., Any]

class Task:
    """A computation with a Python implementation per kind of unit."""

    def __init__(
        self,
        name: str,
        *,
        cpu: Optional[_Impl] = None,
        opencl: Optional[_Impl] = None,
        cuda: Optional[_Impl] = None,
        emulated: Optional[Mapping[str, Tuple[Callable[..., float], _Impl]]] = None,
        sizes: Union[None, Callable[..., Tuple[int, int]], Tuple[int, int]] = None,
    ) -> None: ...
    @property
    def name(self) -> str: ...
    @property
    def implementations(self) -> List[str]: ...

class Future:
    """The pending result of ``Runtime.submit``."""

    def result(self, timeout: Optional[float] = None) -> Any: ...
    def done(self) -> bool: ...
    @property
    def unit(self) -> Optional[str]:
        """The unit the call ran on (waits for the call)."""
    @property
    def turnaround(self) -> Optional[float]:
        """Seconds from submit to result (waits for the call)."""

class Runtime:
    """This program's runtime: places tasks by predicted turnaround under contention."""

    def __init__(
        self,
        name: str = "python",
        *,
        monitor: str = "auto",
        socket: Optional[str] = None,
        config: Optional[str] = None,
        model_dir: Optional[str] = None,
        persist_models: bool = True,
        opencl: bool = True,
    ) -> None: ...
    @property
    def monitor(self) -> str:
        """``"daemon"`` or ``"embedded"``."""
    def submit(self, task: Task, *args: Any) -> Future: ...
    def run(self, task: Task, *args: Any) -> Any: ...
    def units(self) -> List[Unit]: ...
    def stats(self) -> Dict[str, Any]: ...
    def predict(self, task: str, bytes_in: int = 0) -> Dict[str, Optional[float]]: ...
    def wait_all(self) -> None: ...
    def save_models(self) -> None: ...
    def close(self) -> None: ...
    def __enter__(self) -> "Runtime": ...
    def __exit__(self, *exc: Any) -> None: ...

def report_capability_fallback(category: str) -> None:
    """Counts one fallback of the calling thread, on the CPU it runs on, for
    ``"vector"``, ``"crypto"`` or ``"float64"`` work (a slower path taken
    because the core lacks an instruction set extension); ``hetsched
    balance`` keeps the thread off such cores. ValueError for another name."""

def rust_empty_task_ns(runtime: Runtime, calls: int) -> float:
    """Mean ns of an empty CPU task submitted from Rust (python -m hetsched.bench)."""

def rust_gate_ns(client: Client, unit: str, calls: int) -> float:
    """Mean ns of one pass through ``unit``'s gate from Rust (python -m hetsched.bench)."""

def turnaround(
    exec_ns: float,
    slots: int,
    *,
    runnable_threads: Optional[float] = None,
    backlog: Optional[float] = None,
    view: Optional[Dict[str, Any]] = None,
    dispatch_ns: float = 0.0,
    copy_ns: float = 0.0,
    ahead_ns: float = 0.0,
) -> Optional[Dict[str, float]]:
    """hetsched's placement formula for one task on one unit:
    ``turnaround = dispatch + copy + (ahead + exec) × stretch`` and
    ``rate = slots / (exec × stretch)``, the stretch from exactly one of
    ``runnable_threads`` (a CPU kind), ``backlog`` (tasks queued and running
    on a device) and ``view`` (``Client.view``'s dict). A dict with
    ``stretch``, ``stretched_ns``, ``ahead_ns``, ``turnaround_ns`` and
    ``rate_per_s``; ``None`` when ``exec_ns`` is not finite and ≥ 0."""
