"""Inductor's and Dynamo's option defaults come from a cache file after the first run, so a run
does not import Dynamo in its own process; the file holds what the import gives."""
import json
import os
import subprocess
import sys

from conftest import ROOT

READ = """
import json, sys
from tuner.system.config_defaults import Opaque, inductor_defaults
from tuner.space.dynamo_settings import canonical_name, known_settings
inductor, dynamo = inductor_defaults(), known_settings()
print(json.dumps({"imported": "torch._dynamo" in sys.modules,
                  "inductor": {k: v for k, v in inductor.items() if not isinstance(v, Opaque)},
                  "opaque": sorted(k for k, v in inductor.items() if isinstance(v, Opaque)),
                  "dynamo": {k: v for k, v in dynamo.items() if not isinstance(v, Opaque)},
                  "alias": canonical_name("cache_size_limit")}))
"""

FROM_TORCH = """
import json
import torch._inductor.config as inductor
options = inductor.get_config_copy()
print(json.dumps({"names": sorted(options),
                  "scalars": {k: v for k, v in options.items() if v is None or type(v) in (bool, int, float, str)}}))
"""


def run(code: str, cache) -> dict:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                         check=True, timeout=300).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_a_second_run_reads_the_defaults_without_importing_dynamo(tmp_path):
    first, second, third = (run(READ, tmp_path) for _ in range(3))
    assert first["imported"], "the first run on an install imports them"
    assert not third["imported"], "later runs read the cache files"
    assert first["inductor"] == third["inductor"] and first["dynamo"] == third["dynamo"]
    assert first["opaque"] == third["opaque"]
    assert third["alias"] == "recompile_limit" and third["dynamo"]["recompile_limit"] == 8
    torch_gives = run(FROM_TORCH, tmp_path)
    assert sorted([*third["inductor"], *third["opaque"]]) == torch_gives["names"]
    assert {k: third["inductor"][k] for k in torch_gives["scalars"]} == torch_gives["scalars"]


def test_a_process_that_changed_the_config_first_writes_no_cache(tmp_path):
    changed = "import torch._dynamo.config as c\nc.recompile_limit = 99\n" + READ
    assert run(changed, tmp_path)["dynamo"]["recompile_limit"] == 99, "its own values, as before"
    assert not list(tmp_path.rglob("torch-_dynamo-config-*.json"))
    assert run(READ, tmp_path)["dynamo"]["recompile_limit"] == 8


def test_a_space_option_of_the_wrong_type_names_the_default(tmp_path):
    from tuner.core.errors import SpaceError
    from tuner.space.search_space import load_space

    space = tmp_path / "s.yaml"
    space.write_text("backend: [inductor]\noptions:\n  freezing: [1]\n")
    try:
        load_space(str(space))
    except SpaceError as exc:
        assert "options.freezing" in str(exc) and "bool like the default False" in str(exc), str(exc)
    else:
        raise AssertionError("a wrong type is an error")
