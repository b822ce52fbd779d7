"""Pin glibc malloc's heap on CPU: what every trial is measured under, and what
``tuner.apply_config`` reproduces in the user's process.

PyTorch's CPU tensors come from the C library's ``malloc``. glibc serves a block over its mmap
threshold (128 KiB at first, raised as such blocks are freed) with a fresh ``mmap``, and gives
the top of its heap back to the system past the trim threshold, so the next step faults those
pages in again. How often that happens depends on the process's history, not on the model.
Measured on this project's 2-core VM (torch 2.13, docs/zoo.md): eager alone on a chain of
elementwise ops over a 1 MiB tensor took 2.0-6.1 ms a step in fresh processes, and 1.3 ms in a
process that had also run the compiled model; GPT-2 small training steps ran 17 % faster with the
heap pinned, and its speedup read 1.09-1.18x in one process against 1.01x in processes of their
own unpinned, 1.03-1.04x either way pinned. Pinned (a block of up to 1 GiB stays in the heap,
and the heap is not trimmed), every step reuses the pages of the step before, whatever ran first.
"""
from __future__ import annotations

import ctypes
import platform
import sys

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 1 << 30
TRIM_THRESHOLD = 2**31 - 1  # mallopt takes a C int
#: The same settings for a process started from a shell (read by glibc at start-up).
ENV = {"MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD), "MALLOC_TRIM_THRESHOLD_": str(TRIM_THRESHOLD)}
PINNED = "pinned"
DEFAULT = "default"
#: What ``tuned_on.heap`` says when the thresholds were pinned.
PINNED_NOTE = "glibc malloc pinned: mmap threshold 1 GiB, trim threshold 2 GiB"
#: Why ``apply_config`` pins the heap for every verdict, as ``measured.heap_pinned_because`` and the
#: verdict say it: the figures were measured pinned, and pinned is where timing eager beside a config
#: is fair. It is not a gain the race decided: ``measured.heap_gain`` is a side figure whose interval
#: two rounds cannot give (tuner/decide/eager_alone.py, ``HEAP_GAIN_DF``).
PIN_REASON = ("every step time quoted, eager's and each config's, was measured with glibc's heap pinned, where "
              "eager timed beside a compiled model reads as eager alone (0.97x-1.01x on the zoo's seven "
              "workloads, docs/zoo.md); apply_config pins it so that your process runs as measured, not for a "
              "gain: the pin's own gain is not decided")


def pinned_as_measured(tuned_on) -> bool:
    """Whether a config measured so (``tuned_on``: ``heap``, ``device``) has ``apply_config`` pin
    the heap: on CPU where the trials pinned it (glibc's thresholds mean nothing to CUDA's
    caching allocator).

    >>> [pinned_as_measured({"heap": PINNED_NOTE, "device": d}) for d in ("cpu", "cuda:0")]
    [True, False]
    """
    return str(tuned_on.get("heap", "")) == PINNED_NOTE and not str(tuned_on.get("device", "cpu")).startswith("cuda")


def pin_heap() -> str | None:
    """Pin the thresholds in this process; :data:`PINNED_NOTE`, or None where the C library is
    not glibc (macOS, musl) and nothing was changed."""
    if not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc":
        return None
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return None
    ok = mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1 and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
    return PINNED_NOTE if ok else None
