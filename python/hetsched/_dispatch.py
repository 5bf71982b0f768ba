"""The dispatch gate as a context manager, and how device time is measured."""

from __future__ import annotations

import time
import warnings
from typing import TYPE_CHECKING, Any, List, Optional

if TYPE_CHECKING:
    from . import Client, Grant


class Dispatch:
    """One grant of a unit's slot, held for the length of a ``with`` block.

    Made by :meth:`hetsched.Client.dispatch`. Inside the block,
    :attr:`grant` is the grant (``grant.waited_ns``: how long the agent kept
    this process waiting). After it, :attr:`ran_ns` is the device time that
    was reported.
    """

    def __init__(self, client: "Client", unit: str, expected_ns: int = 0) -> None:
        if expected_ns < 0:
            raise ValueError(f"expected_ns must be >= 0, got {expected_ns}")
        self._client = client
        self.unit = unit
        self.expected_ns = expected_ns
        self.grant: Optional["Grant"] = None
        self.ran_ns: Optional[int] = None
        self._events: List[Any] = []
        self._device_ns: Optional[int] = None
        self._start = 0

    def record(self, *events: Any) -> None:
        """Device work to time: pyopencl events (from a queue with profiling
        enabled) or ``(start, end)`` pairs of CuPy or PyTorch CUDA events."""
        self._events.extend(events)

    def device_time(self, ns: int) -> None:
        """Reports ``ns`` of device time (instead of events or wall time)."""
        if ns < 0:
            raise ValueError(f"device time must be >= 0 ns, got {ns}")
        self._device_ns = int(ns)

    def __enter__(self) -> "Dispatch":
        self.grant = self._client.request_dispatch(self.unit, self.expected_ns)
        self._start = time.perf_counter_ns()
        return self

    def __exit__(self, *exc: Any) -> None:
        wall = time.perf_counter_ns() - self._start
        ran = self._device_ns
        if ran is None and self._events:
            ran = _events_ns(self._events)
        self.ran_ns = wall if ran is None else ran
        assert self.grant is not None
        self._client.task_completed(self.grant, self.ran_ns)


_warned = False


def _events_ns(events: List[Any]) -> Optional[int]:
    """Device time of ``events`` in ns, or ``None`` (with one warning per
    process) when they cannot be read."""
    global _warned
    total = 0.0
    try:
        for e in events:
            if isinstance(e, tuple) and len(e) == 2:
                total += _cuda_pair_ns(*e)
            else:
                e.wait()
                total += e.profile.end - e.profile.start
    except Exception as err:  # a queue without profiling, a foreign event
        if not _warned:
            _warned = True
            warnings.warn(
                f"hetsched: cannot read device time from events ({err}); reporting wall time",
                RuntimeWarning,
                stacklevel=3,
            )
        return None
    return int(total)


def _cuda_pair_ns(start: Any, end: Any) -> float:
    end.synchronize()
    if type(start).__module__.startswith("cupy"):
        import cupy

        return cupy.cuda.get_elapsed_time(start, end) * 1e6
    # torch.cuda.Event
    return start.elapsed_time(end) * 1e6
