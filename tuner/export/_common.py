"""What every export shares: the view of a best_config.yaml mapping the builders read, the
records of what a tool loses (``not_carried``) or changes (``changes_measured``), and the settings
of the measured process that no tool's config file holds (the heap pin, the thread count)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.precision import CHANGES_NUMERICS
from ..core.precision import MEANING as PRECISION_MEANING
from ..system.heap import ENV as HEAP_ENV
from ..system.heap import PINNED_NOTE

_ENV_HINT = "`compile-tune export --to env` sets the ones inductor reads from a TORCHINDUCTOR_* variable"


class _View:
    """The fields of a best_config.yaml mapping that exports read, with the tuner's rules applied:
    mode and options count for inductor only, and ``default`` is no mode."""

    def __init__(self, tuned: Mapping[str, Any]) -> None:
        cfg = tuned.get("config") or {}
        self.target = cfg.get("target", "whole")
        self.compiles = tuned.get("verdict", "compile") == "compile" and self.target != "none"
        self.backend = cfg.get("backend", "inductor")
        inductor = self.backend == "inductor"
        self.mode = cfg.get("mode") if inductor and cfg.get("mode") != "default" else None
        self.options = dict(cfg.get("options") or {}) if inductor else {}
        self.dynamic = cfg.get("dynamic")
        self.heap_pinned = (tuned.get("tuned_on") or {}).get("heap") == PINNED_NOTE
        self.fullgraph = bool(cfg.get("fullgraph", False))
        self.compile_optimizer = bool(cfg.get("compile_optimizer", False))
        self.precision = cfg.get("precision") if self.compiles else None
        self.marks = {kind: cfg[kind] for kind in ("mark_dynamic", "mark_unbacked") if cfg.get(kind)}
        self.dynamo = dict(cfg.get("dynamo") or {})
        self.measured = tuned.get("measured") or {}
        self.tuned_on = tuned.get("tuned_on") or {}
        self.data_parallel = {k: v for k, v in (cfg.get("data_parallel") or {}).items() if k != "wrap"}
        self.device = str(self.tuned_on.get("device") or "")
        threads = self.tuned_on.get("threads")
        self.threads = threads if isinstance(threads, int) and not isinstance(threads, bool) else None
        self.nproc = int(self.tuned_on.get("nproc") or 1)  # processes per machine (--nproc)
        self.nnodes = int(self.tuned_on.get("nnodes") or 1)  # machines (--nnodes)
        self.block_class = self.tuned_on.get("block_class")  # the class FSDP2 sharded, where a run records it

    @property
    def on_cpu(self) -> bool:
        return self.device.startswith("cpu")


def _refused(c: _View, tool: str, why: str) -> dict[str, Any]:
    """The block of a tool that cannot carry the config's precision: no settings, the reason."""
    assert c.precision is not None  # callers refuse a config that sets one
    return {"refused": f"precision {c.precision} ({PRECISION_MEANING[c.precision]}) {CHANGES_NUMERICS}, and "
                       f"{tool} {why}", "not_carried": [_lost("precision", c.precision, f"{tool} {why}")]}


def _lost(setting: str, value: Any, why: str, fix: list[str] | None = None) -> dict[str, Any]:
    """One setting a tool loses (or changes): its value, why, and the exact lines that set it
    where the tool's own format cannot (``fix``: shell lines, code lines or config lines)."""
    return {"setting": setting, "value": value, "why": why, **({"fix": fix} if fix else {})}


def launch_line(c: _View, command: str = "train.py") -> str:
    """The torchrun line that starts the measured processes (``--nproc``, ``--nnodes``)."""
    if c.nnodes > 1:
        return (f"torchrun --nnodes {c.nnodes} --nproc_per_node {c.nproc} --node_rank RANK_OF_THIS_MACHINE "
                f"--rdzv_endpoint HOST:PORT {command}")
    return f"torchrun --nproc_per_node {c.nproc} {command}"


def thread_variables(c: _View) -> dict[str, str]:
    """``OMP_NUM_THREADS`` at the thread count every trial ran at, where the run recorded it."""
    return {"OMP_NUM_THREADS": str(c.threads)} if c.threads else {}


def heap_variables(c: _View) -> dict[str, str]:
    """glibc malloc's thresholds as every trial pinned them (tuner/system/heap.py), or none."""
    return dict(HEAP_ENV) if c.heap_pinned else {}


def _environment_losses(c: _View, tool: str) -> list[dict[str, Any]]:
    """The process settings every trial ran with that ``tool``'s config cannot hold: the heap pin
    and the thread count, each with the ``export`` lines that set them before the run starts."""
    lost = []
    if c.heap_pinned:
        lost.append(_lost("heap", "pinned", f"every trial ran with glibc malloc's thresholds pinned ({PINNED_NOTE}); "
                          f"{tool} leaves glibc's defaults, and CPU step times depend on them: every step time "
                          "the verdict quotes, eager's too, was measured pinned (measured.heap_pinned_because). "
                          "Set before starting (glibc reads them at "
                          "start-up), or let tuner.apply_config pin them in the process",
                          [f"export {k}={v}" for k, v in heap_variables(c).items()]))
    if c.threads:
        lost.append(_lost("threads", c.threads, f"{tool}'s settings hold no thread count; the verdict holds at "
                          f"{c.threads} torch thread(s) per process, and torchrun (so accelerate launch too) sets "
                          "OMP_NUM_THREADS=1 for every process of a many-process launch when it is unset. Set before "
                          "starting", [f"export OMP_NUM_THREADS={c.threads}"]))
    return lost


_MARKERS = {"mark_dynamic": "torch._dynamo.mark_dynamic", "mark_unbacked": "torch._dynamo.decorators.mark_unbacked"}


def _common_losses(c: _View, tool: str) -> list[dict[str, Any]]:
    """What no tool but compile-tune's own runtime carries: the optimizer compile and the warm start."""
    lost = []
    for kind, dims in c.marks.items() if c.compiles else ():
        lost.append(_lost(kind, dims, f"{tool} calls torch.compile only; the measured config marks these input "
                          f"dimensions on every call ({_MARKERS[kind]}), which tuner.apply_config does; "
                          "without the marks the first new size recompiles"))
    for name, value in c.dynamo.items() if c.compiles else ():
        lost.append(_lost(f"dynamo.{name}", value, f"{tool} has no setting for torch._dynamo.config; the measured "
                          f"config sets it around every compiled call, which tuner.apply_config does (or wrap the "
                          f"calls in torch._dynamo.config.patch({name}={value!r}))"))
    if c.compile_optimizer:
        lost.append(_lost("compile_optimizer", True, f"{tool} compiles the model only; compile the optimizer step "
                          "with tuner.optimizer_step(optimizer, PATH_TO_best_config.yaml)"))
    if c.measured.get("warm_start_s") is not None:
        cold, warm = c.measured.get("cold_start_s", 0), c.measured["warm_start_s"]
        lost.append(_lost("warm_start", "compile_cache/", "the compile cache saved beside best_config.yaml is loaded "
                          "only by tuner.apply_config; without it the first step compiles cold "
                          f"(measured: {cold:.1f} s cold, {warm:.1f} s warm)"))
    return lost


def _option_losses(c: _View, tool: str) -> list[dict[str, Any]]:
    return [_lost(f"options.{k}", v, f"{tool} has no setting for inductor options; {_ENV_HINT}")
            for k, v in c.options.items()]


def _mode_options(mode: str | None) -> dict[str, Any]:
    if not mode:
        return {}
    import torch._inductor  # only for a mode: its option set is torch's own

    return dict(torch._inductor.list_mode_options(mode))
