"""The data-parallel settings of a config tuned on many ranks (``CompileConfig.data_parallel``):
their names, values and defaults, checked here; wrapping a model with them is
tuner/runtime/parallel_wrap.py.

``wrap`` is ``ddp`` (``DistributedDataParallel``) or ``fsdp2`` (``fully_shard`` on every repeated
block, then on the model with fully_shard's default for the root, as torchtitan shards). The
settings that exist only there:

- ``optimize_ddp`` (DDP): ``torch._dynamo.config.optimize_ddp``. ``ddp_optimizer`` splits the
  compiled graph at DDP's bucket boundaries so gradients are all-reduced while backward goes on;
  ``no_optimization`` compiles one graph and all-reduces after it.
- ``bucket_cap_mb`` (DDP): the gradient bucket size; 25 is DDP's default, 100 torchtitan's. With
  ``ddp_optimizer`` it also sets how many graphs the model is split into.
- ``reshard_after_forward`` (FSDP2): the blocks free their gathered parameters after forward (and
  gather them again for backward: less memory, more communication) or keep them. The root (the
  model itself) always keeps its own: fully_shard's default for a root, which backward needs at once.
- ``keep_last_block_gathered`` (FSDP2, with ``reshard_after_forward``): the last block keeps its
  gathered parameters after forward anyway, since backward starts with it and would gather them
  again at once; torchtitan does so for the layers after its last block (``apply_fsdp``).

Compile order is not a setting: ``torch.compile`` traces at the first call, which comes after
wrapping whichever order the two calls are written in, and compile-tune compiles ``forward``
(DDP's and FSDP2's hooks run around it), so both orders compile the same graphs. compile-tune
compiles first, as torchtitan does.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .errors import ConfigError

WRAPS = ("ddp", "fsdp2")
OPTIMIZE_DDP = ("ddp_optimizer", "no_optimization")
#: What each wrap's settings are when a config leaves them out: DDP's and FSDP2's own defaults,
#: so the eager baseline is the wrapped model as a user constructs it today.
DEFAULTS: dict[str, dict[str, Any]] = {
    "ddp": {"optimize_ddp": "ddp_optimizer", "bucket_cap_mb": 25},
    "fsdp2": {"reshard_after_forward": True, "keep_last_block_gathered": False},
}


def check_data_parallel(settings: Any) -> dict[str, Any]:
    """``settings`` checked and in canonical form (keys sorted); ``{}`` for one process."""
    if not isinstance(settings, Mapping):
        raise ConfigError(f"`data_parallel` must be a mapping such as {{wrap: ddp}}, got {type(settings).__name__}")
    if not settings:
        return {}
    wrap = settings.get("wrap")
    if wrap not in WRAPS:
        raise ConfigError(f"`data_parallel.wrap` must be one of {', '.join(WRAPS)}, got {wrap!r}")
    unknown = sorted(set(settings) - {"wrap", *DEFAULTS[wrap]})
    if unknown:
        raise ConfigError(f"`data_parallel` with wrap {wrap} takes {', '.join(sorted(DEFAULTS[wrap]))}, "
                          f"got {', '.join(unknown)}")
    out = {"wrap": wrap, **{k: settings[k] for k in DEFAULTS[wrap] if k in settings}}
    if "optimize_ddp" in out and out["optimize_ddp"] not in OPTIMIZE_DDP:
        raise ConfigError(f"`data_parallel.optimize_ddp` must be one of {', '.join(OPTIMIZE_DDP)}, "
                          f"got {out['optimize_ddp']!r}")
    bucket = out.get("bucket_cap_mb")
    if bucket is not None and (isinstance(bucket, bool) or not isinstance(bucket, (int, float)) or bucket <= 0):
        raise ConfigError(f"`data_parallel.bucket_cap_mb` must be a positive number of MB, got {bucket!r}")
    for name in ("reshard_after_forward", "keep_last_block_gathered"):
        if not isinstance(out.get(name, True), bool):
            raise ConfigError(f"`data_parallel.{name}` must be true or false, got {out[name]!r}")
    if out.get("reshard_after_forward") is False:
        out.pop("keep_last_block_gathered", None)  # every block keeps its parameters: one config, one key
    return dict(sorted(out.items()))


def resolved(settings: Mapping[str, Any], wrap: str) -> dict[str, Any]:
    """Every setting of ``wrap``, the config's own over the defaults."""
    return {"wrap": wrap, **DEFAULTS[wrap], **{k: v for k, v in settings.items() if k != "wrap"}}


def describe_data_parallel(settings: Mapping[str, Any]) -> str:
    """``ddp(ddp_optimizer, bucket 100 MB)``, ``fsdp2(reshard after forward)``,
    ``fsdp2(reshard after forward, last block kept gathered)``."""
    full = resolved(settings, settings["wrap"])
    if full["wrap"] == "ddp":
        return f"ddp({full['optimize_ddp']}, bucket {full['bucket_cap_mb']:g} MB)"
    if not full["reshard_after_forward"]:
        return "fsdp2(keep gathered)"
    last = ", last block kept gathered" if full["keep_last_block_gathered"] else ""
    return f"fsdp2(reshard after forward{last})"
