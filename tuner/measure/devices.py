"""The device side of measuring: clocks that wait for the device, memory in use and at peak,
moving inputs, and what machine a trial ran on. Used inside trial processes."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from .tree import map_tensors


def sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def timed(fn, device: str) -> tuple[float, Any]:
    sync(device)
    start = time.perf_counter()
    out = fn()
    sync(device)
    return time.perf_counter() - start, out


def memory_in_use(device: str) -> int:
    """Bytes in use now: CUDA tensors, or this process's resident set on CPU."""
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()
        return torch.cuda.memory_allocated()
    return _rss_bytes("VmRSS")


def _rss_bytes(field: str = "VmRSS") -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


class PeakMemory:
    """The process's peak memory while a block of code runs, in the units a user watches.

    CUDA: ``torch.cuda.max_memory_allocated`` (bytes held by tensors at the peak; the counter is
    reset on entry). CPU: the process's peak resident set (``VmHWM``: Python, torch, the model,
    and everything the block allocated), reset on entry through ``/proc/self/clear_refs`` so
    each block is measured on its own. Absolute, not over a baseline: every config is measured
    the same way in a process that holds the model once, so eager and a compiled config differ
    only by what compiling costs.
    """

    def __init__(self, device: str) -> None:
        self.device = device
        self.peak_bytes = 0

    def __enter__(self) -> PeakMemory:
        if self.device.startswith("cuda"):
            import torch

            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        else:
            try:
                with open("/proc/self/clear_refs", "w") as f:
                    f.write("5")
            except OSError:
                pass
        return self

    def __exit__(self, *exc) -> None:
        if self.device.startswith("cuda"):
            import torch

            torch.cuda.synchronize()
            self.peak_bytes = torch.cuda.max_memory_allocated()
        else:
            self.peak_bytes = _rss_bytes("VmHWM")

    @property
    def peak_mb(self) -> float:
        return self.peak_bytes / 2**20


def to_device(value, device: str):
    """``value`` with every tensor in it on ``device`` (containers as in ``tree``)."""
    return map_tensors(lambda t: t.to(device), value)


def environment(device: str) -> dict:
    """Where a trial ran: torch, device and its name, CPU, threads, host."""
    import platform

    import torch

    info = {
        "torch": torch.__version__,
        "device": device,
        "python": platform.python_version(),
        "host": platform.node(),
        "threads": torch.get_num_threads(),
        "cpu": _cpu_name(),
    }
    if device.startswith("cuda"):
        info["device_name"] = torch.cuda.get_device_name()
    else:
        info["device_name"] = _cpu_name()
    return info


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or "cpu"


def limit_memory(limit_mb: float | None) -> None:
    if not limit_mb:
        return
    import resource

    # RLIMIT_DATA covers heap and private anonymous mappings (where tensors live) but not the
    # shared libraries torch maps, so it bounds what the model allocates.
    limit = int(limit_mb * 2**20)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
