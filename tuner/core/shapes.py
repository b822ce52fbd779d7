"""Dynamic shapes as search-space data: the ``dynamic`` choices that mark input dimensions, and
the Dynamo settings an input schedule makes worth searching.

``torch.compile(dynamic=...)`` offers null (static first, automatic dynamic after a change), true
(every dimension dynamic) and false (a static graph per shape). Two more choices mark exactly the
input dimensions that vary over the schedule (tuner/runtime/marks.py applies the marks):

- ``marked``: ``mark_dynamic(min, max)``; a dimension whose range reaches 0 or 1 gets
  ``maybe_mark_dynamic``, because Dynamo specialises sizes 0 and 1 (a hard mark would fail the
  trace), so a size of 1 still compiles a graph of its own.
- ``marked_unbacked``: the dimensions that reach 0 or 1 get ``mark_unbacked`` instead: the size
  becomes an unbacked symbol, never specialised, so size 1 runs the same graph. Not strict: code
  that branches on the size being 1 specialises it again (a recompile, no error); and inductor
  assumes the size is not 1, which can compute size-1 semantics wrong (``x.squeeze(0)`` at batch 1
  kept the dimension in torch 2.13), so the trial's check of every distinct input, size 1
  included, fails such a config as ``wrong_results`` and the search moves on.

And two ``torch._dynamo.config`` settings, added by :meth:`tuner.space.search_space.SearchSpace.restrict` when the
schedule calls for them (:func:`schedule_settings`); each matters only with some ``dynamic`` choices
(:func:`matters`), and with the others it stays at Dynamo's default, so no config is measured twice:

- ``recompile_limit``: Dynamo compiles at most 8 graphs per function, then runs it eagerly,
  silently. With ``dynamic: false`` and more distinct input shapes than that, a raised limit makes
  "a static graph for every shape" a config the search measures, instead of a config that is
  partly eager.
- ``automatic_dynamic_shapes: false`` (never switch to dynamic shapes) with ``dynamic: null`` is
  what ``torch.compile(dynamic=False)`` sets (``eval_frame.make_set_enable_dynamic``), so it is
  added only to a space that searches ``dynamic`` without ``false``.

Nothing here imports torch.

Example:
    >>> split_marks({"0": {0: [1, 32], 1: [8, 64]}}, unbacked=True)
    {'mark_dynamic': {'0': {1: [8, 64]}}, 'mark_unbacked': {'0': {0: [1, 32]}}}
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: ``dynamic`` choice: mark exactly the input dimensions that vary over the schedule.
MARKED = "marked"
#: ``dynamic`` choice: as ``marked``, with ``mark_unbacked`` for the dimensions reaching 0 or 1.
MARKED_UNBACKED = "marked_unbacked"
DYNAMIC_CHOICES = (None, True, False, MARKED, MARKED_UNBACKED)
RECOMPILE_LIMIT = "recompile_limit"
AUTOMATIC_DYNAMIC = "automatic_dynamic_shapes"


def reaches_one(marks: Mapping[str, Mapping[int, Any]]) -> bool:
    """Whether a marked dimension's range reaches 0 or 1 (which Dynamo specialises)."""
    return any(low <= 1 for dims in marks.values() for low, _ in dims.values())


def split_marks(marks: Mapping[str, Mapping[int, Any]], *, unbacked: bool) -> dict[str, dict]:
    """The config fields of a marked choice: every varying dimension in ``mark_dynamic``, or with
    ``unbacked`` those whose range reaches 0 or 1 in ``mark_unbacked``."""
    dynamic: dict[str, dict] = {}
    backless: dict[str, dict] = {}
    for name, dims in marks.items():
        for dim, (low, high) in dims.items():
            (backless if unbacked and low <= 1 else dynamic).setdefault(name, {})[dim] = [low, high]
    return {"mark_dynamic": dynamic, "mark_unbacked": backless}


def choice_of(cfg) -> Any:
    """The ``dynamic`` choice a :class:`~tuner.core.config.CompileConfig` (or its ``to_dict()``) stands for."""
    get = cfg.get if isinstance(cfg, Mapping) else lambda name: getattr(cfg, name)
    if get("mark_unbacked"):
        return MARKED_UNBACKED
    return MARKED if get("mark_dynamic") else get("dynamic")


def settings_text(dynamo: Mapping[str, Any] | None) -> str:
    """The schedule settings among a config's ``dynamo`` ones, as the report's dynamic-shapes table
    shows them next to the choice: `` recompile_limit=16``, `` automatic_dynamic_shapes=false``."""
    shown = [(n, (dynamo or {})[n]) for n in (AUTOMATIC_DYNAMIC, RECOMPILE_LIMIT) if n in (dynamo or {})]
    return "".join(f" {n}={str(v).lower() if isinstance(v, bool) else v}" for n, v in shown)


def matters(name: str, cfg) -> bool:
    """Whether the schedule setting ``name`` changes what ``cfg`` compiles (see the module docstring)."""
    automatic = cfg.dynamic is None and not (cfg.mark_dynamic or cfg.mark_unbacked)
    if name == AUTOMATIC_DYNAMIC:
        return automatic
    if name == RECOMPILE_LIMIT:  # a graph per shape: dynamic=false, or null that never turns dynamic
        return cfg.dynamic is False or automatic and cfg.dynamo.get(AUTOMATIC_DYNAMIC) is False
    return True


@dataclass(frozen=True)
class ShapeSetting:
    """A Dynamo setting the input schedule makes worth searching: its choices and why."""

    name: str
    values: list
    reason: str


def schedule_settings(dynamic: list, *, shapes: int, varies: bool, listed: Mapping[str, Any],
                      recompile_limit: int) -> tuple[list[ShapeSetting], list[str]]:
    """The Dynamo settings to add to a space searching ``dynamic`` over a schedule of ``shapes``
    distinct input shapes, and what is left out with why. ``listed``: the space's own ``dynamo``
    section (a setting it lists is its own choice); ``recompile_limit``: Dynamo's default here.

    Example:
        >>> added, _ = schedule_settings([None, False], shapes=11, varies=True, listed={}, recompile_limit=8)
        >>> [(s.name, s.values) for s in added]
        [('recompile_limit', [8, 16])]
    """
    added: list[ShapeSetting] = []
    skipped: list[str] = []
    if not varies:
        return added, skipped
    static = False in dynamic
    if AUTOMATIC_DYNAMIC not in listed and None in dynamic and len(dynamic) > 1:
        if static:
            skipped.append(f"dynamo.{AUTOMATIC_DYNAMIC}=false: with dynamic=null it is dynamic=false "
                           "(torch.compile(dynamic=False) sets exactly that), already a choice")
        else:
            added.append(ShapeSetting(AUTOMATIC_DYNAMIC, [True, False], "false never switches to dynamic shapes: a "
                                      "static graph per input shape (searched with dynamic=null only)"))
            static = True
    if RECOMPILE_LIMIT not in listed and static and shapes > recompile_limit:
        room = -(-shapes // 8) * 8  # every shape's graph, rounded up to a multiple of 8
        added.append(ShapeSetting(RECOMPILE_LIMIT, [recompile_limit, room],
                                  f"the schedule has {shapes} input shapes, more than Dynamo's limit of "
                                  f"{recompile_limit} graphs: a static graph per shape runs the shapes past it "
                                  f"eagerly; {room} compiles them all (searched with a graph per shape only)"))
    return added, skipped


def recommend_dynamic(per_dynamic: Mapping[str, Mapping[str, Any]]) -> str:
    """The model check's advice: the default (null) when it settles after a couple of recompiles
    (it switches to dynamic shapes by itself); otherwise the setting with the fewest recompiles
    that works."""
    order = ["null", "false", "true"]
    ok = [k for k in order if k in per_dynamic and not per_dynamic[k]["error"]
          and not per_dynamic[k]["recompile_limit_hit"]]
    if not ok:
        return "true"
    if "null" in ok and per_dynamic["null"]["recompiles"] <= 2:
        return "null"
    return min(ok, key=lambda k: (per_dynamic[k]["recompiles"], order.index(k)))


def merge_check_parts(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One model check from its parts (``TrialSpec.check_part``): part 0 holds the graph breaks,
    each part some ``dynamic`` settings' traces over the schedule; listed in the order one
    process traces them, and the advice taken over all of them. Seconds: the longest part's."""
    merged = dict(parts[0])
    merged["seconds"] = max(float(p.get("seconds") or 0.0) for p in parts)
    schedules = [p["schedule"] for p in parts if p.get("schedule")]
    if schedules:
        found = {k: v for s in schedules for k, v in s["dynamic"].items()}
        first = [k for k in ("null", "false") if k in found]
        later = [k for k in ("true", MARKED, MARKED_UNBACKED) if k in found]
        raised = [k for k in found if k not in first + later]  # `false recompile_limit=N`, after false
        per_dynamic = {k: found[k] for k in first + later + raised}
        merged["schedule"] = {"length": schedules[0]["length"], "dynamic": per_dynamic,
                              "recommended_dynamic": recommend_dynamic(per_dynamic)}
    return merged
