"""Write vLLM's CompilationConfig field names (and CompilationMode's values) as JSON, read with
``ast`` from vLLM's own ``vllm/config/compilation.py`` (a wheel's or a checkout's): the pinned
record tests/test_export_titan_vllm.py holds the vLLM export against. vLLM needs its own CUDA
torch and cannot be installed beside the CPU wheel, so the test reads this record instead.

    python tests/data/extract_vllm_config.py PATH/vllm/config/compilation.py 0.33.0 g4ba787ec9
"""
from __future__ import annotations

import ast
import hashlib
import json
import sys
from pathlib import Path


def extract(source: str) -> dict:
    tree = ast.parse(source)
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}

    def fields(name: str) -> list[str]:
        out = []
        for stmt in classes[name].body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                keyword = stmt.value
                init_false = (isinstance(keyword, ast.Call) and any(
                    k.arg == "init" and isinstance(k.value, ast.Constant) and k.value.value is False
                    for k in keyword.keywords))
                if not init_false and not stmt.target.id.startswith("_"):
                    out.append(stmt.target.id)
        return out

    def members(name: str) -> dict[str, str]:
        return {t.id: ast.unparse(stmt.value) for stmt in classes[name].body if isinstance(stmt, ast.Assign)
                for t in stmt.targets if isinstance(t, ast.Name)}

    return {"CompilationConfig": fields("CompilationConfig"), "PassConfig": fields("PassConfig"),
            "CompilationMode": members("CompilationMode"), "CUDAGraphMode": members("CUDAGraphMode")}


def main(argv: list[str]) -> int:
    path, version, commit = Path(argv[0]), argv[1], argv[2]
    text = path.read_text()
    record = {"vllm": version, "commit": commit, "path": "vllm/config/compilation.py",
              "sha256": hashlib.sha256(text.encode()).hexdigest(), **extract(text)}
    out = Path(__file__).with_name(f"vllm-{version}-compilation-config.json")
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
