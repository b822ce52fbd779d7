"""``best_config.yaml``: a tuned config as the file a user keeps, applies and hands to other tools.

The file is the tool's own export: the config (tuner/core/config.py, values only), what was measured,
where, and under ``exports:`` what accelerate, the HF Trainer, env variables, torchtitan and vLLM can
carry of it (this package). Reading it back checks it and names the file in every error.
"""
from __future__ import annotations

import json
from pathlib import Path

import yaml

from ..core.config import CompileConfig, TunedConfig
from ..core.errors import ConfigError
from ..core.precision import CHANGES_NUMERICS
from ..core.precision import FLAG as PRECISION_FLAG
from ..core.precision import MEANING as PRECISION_MEANING
from . import exports


def save_tuned_config(tuned: TunedConfig, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = (
        "# compile-tune result. Use it with:\n"
        f"#   model = tuner.apply_config(model, \"{path.as_posix()}\")\n"
        "# `exports:` holds what accelerate, the HF Trainer, env variables, torchtitan and vLLM can carry\n"
        "# of it, and what they cannot (compile-tune export DIR --to TOOL prints each in its own format).\n"
    )
    if tuned.config.changes_numerics:
        p = tuned.config.precision
        assert p is not None  # what changes_numerics means
        header += (f"# {CHANGES_NUMERICS.upper()}: precision {p} = {PRECISION_MEANING[p]}; results differ from the "
                   f"model's own float32\n# ones within {p}'s tolerance (checked against eager); tuned with "
                   f"{PRECISION_FLAG}.\n")
    data = tuned.to_dict()
    data["exports"] = exports(data)  # loading ignores it: the config above is the source of truth
    # A JSON round trip turns str subclasses (torch's TorchVersion) and tuples into plain YAML types.
    plain = json.loads(json.dumps(data, default=str))
    path.write_text(header + yaml.safe_dump(plain, sort_keys=False))
    return path


def load_tuned_config(path: str | Path) -> TunedConfig:
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file", "run compile-tune first, or check the path") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({_first_line(exc)})") from None
    if not isinstance(data, dict) or "config" not in data:
        raise ConfigError(f"{path}: expected a mapping with a `config` key (a best_config.yaml)")
    try:
        cfg = CompileConfig.from_dict(data["config"])
    except (ConfigError, TypeError) as exc:
        raise ConfigError(f"{path}: {exc}") from None
    verdict = data.get("verdict", "compile")
    if verdict not in ("compile", "stay_eager", "undecided"):
        raise ConfigError(f"{path}: `verdict` must be compile, stay_eager or undecided, got {verdict!r}")
    return TunedConfig(cfg, verdict, data.get("measured") or {}, data.get("tuned_on") or {}, data.get("thread_check"))


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
