"""The device handed to ``opencl=`` and ``cuda=`` implementations."""

from __future__ import annotations

import threading
from typing import Any, Dict, Tuple

_lock = threading.Lock()
_devices: Dict[Tuple[str, int], "Device"] = {}


class Device:
    """One OpenCL or CUDA device the runtime placed a call on.

    ``api`` is ``"opencl"`` or ``"cuda"``; ``index`` the device's position
    in its API's list (OpenCL: platforms in order, then their devices, as
    ``pyopencl.get_platforms()`` lists them; CUDA: the device ordinal).
    The pyopencl context and queue are made on first use and shared by
    every call on the device; the queue records profiling events.
    """

    def __init__(self, api: str, index: int, name: str) -> None:
        self.api = api
        self.index = index
        self.name = name
        self._cl: Any = None
        self._cl_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Device(api={self.api!r}, index={self.index}, name={self.name!r})"

    def _opencl(self) -> Any:
        if self.api != "opencl":
            raise TypeError(f"{self!r} is not an OpenCL device")
        with self._cl_lock:
            if self._cl is None:
                import pyopencl as cl

                devices = [d for p in cl.get_platforms() for d in p.get_devices()]
                if self.index >= len(devices):
                    raise LookupError(
                        f"pyopencl lists {len(devices)} OpenCL devices; hetsched placed this call on #{self.index}"
                    )
                ctx = cl.Context([devices[self.index]])
                queue = cl.CommandQueue(
                    ctx, properties=cl.command_queue_properties.PROFILING_ENABLE
                )
                self._cl = (ctx, queue)
            return self._cl

    @property
    def context(self) -> Any:
        """The device's ``pyopencl.Context``."""
        return self._opencl()[0]

    @property
    def queue(self) -> Any:
        """The device's ``pyopencl.CommandQueue`` (profiling enabled)."""
        return self._opencl()[1]

    @property
    def cupy(self) -> Any:
        """``cupy.cuda.Device`` of this CUDA device (use it as a context manager)."""
        if self.api != "cuda":
            raise TypeError(f"{self!r} is not a CUDA device")
        import cupy

        return cupy.cuda.Device(self.index)

    @property
    def torch(self) -> Any:
        """``torch.device`` of this CUDA device."""
        if self.api != "cuda":
            raise TypeError(f"{self!r} is not a CUDA device")
        import torch

        return torch.device("cuda", self.index)


def device(api: str, index: int, name: str) -> Device:
    """The one :class:`Device` object for ``(api, index)`` (called by the runtime)."""
    key = (api, index)
    with _lock:
        d = _devices.get(key)
        if d is None:
            d = _devices[key] = Device(api, index, name)
        return d
