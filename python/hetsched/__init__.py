"""hetsched for Python: place work on the CPUs, GPUs and accelerators of a
shared machine by predicted turnaround under contention.

* :class:`Client` talks to the hetsched daemon: units, status, shares, and
  :meth:`Client.dispatch`, the gate a program that drives a device itself
  passes before each run of work on it.
* :class:`Runtime` runs :class:`Task` objects (a Python implementation per
  kind of unit) where they are predicted to finish soonest given everyone
  else on the machine, and returns :class:`Future` objects.
* :mod:`hetsched.ray` brings both to a Ray cluster: one daemon per node,
  tasks placed on the node and unit that finishes them soonest.
"""

from ._native import (
    DaemonError,
    DaemonUnavailable,
    Future,
    Grant,
    HetschedError,
    Runtime,
    Task,
    TaskFailed,
    Unit,
    UnknownUnit,
    __version__,
    report_capability_fallback,
)
from ._native import Client as _NativeClient
from ._devices import Device
from ._dispatch import Dispatch

__all__ = [
    "Client",
    "DaemonError",
    "DaemonUnavailable",
    "Device",
    "Dispatch",
    "Future",
    "Grant",
    "HetschedError",
    "Runtime",
    "Task",
    "TaskFailed",
    "Unit",
    "UnknownUnit",
    "__version__",
    "report_capability_fallback",
]


class Client(_NativeClient):
    """A connection to the hetsched daemon.

    ``Client(name="python", socket=None, observer=False)``; ``socket``
    defaults to ``$HETSCHED_SOCKET``, else the system socket. Raises
    :class:`DaemonUnavailable` when no daemon answers.
    """

    def dispatch(self, unit: str, expected_ns: int = 0) -> Dispatch:
        """The unit's gate as a context manager.

        Entering waits (without holding the GIL) until the unit's agent
        grants this process a slot under the unit's policy; run the device
        work inside the block; leaving gives the slot back with the device
        time: what :meth:`Dispatch.record` was given (pyopencl events with
        profiling, or ``(start, end)`` pairs of CuPy or PyTorch CUDA events),
        or :meth:`Dispatch.device_time`, else the block's wall time.
        """
        return Dispatch(self, unit, expected_ns)
