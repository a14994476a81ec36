"""What the spec's validation library weighs at start-up: the same 13 models of 10 fields each
(constraints, a pattern, a Literal, a dict, one validator each, nested in one spec model, one
document validated) written for pydantic and for msgspec, each imported after typer and PyYAML
in a fresh interpreter under callgrind (instructions: the count does not move with the machine's
load). For issue 44's `submit` goal (benchmarks/RESULTS-cli.md): a figure for deciding a change of
stack, not a change itself. msgspec is not a dependency: pass a folder it is installed in.

    pip install --target /tmp/msgspec-lib msgspec
    .venv/bin/python benchmarks/spec_stack_probe.py --msgspec /tmp/msgspec-lib
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

MODELS, FIELDS = 13, 10


def _field(lib: str, i: int, j: int) -> str:
    kind = j % 4
    if lib == "pydantic":
        return [
            f"    f{j}: int = Field(1, ge=1, description='field {j} of model {i}: how many')",
            f"    f{j}: str = Field('x', pattern=r'^[a-z0-9-]{{1,100}}$', description='a name')",
            f"    f{j}: Literal['a', 'b', 'c'] = 'a'",
            f"    f{j}: dict[str, str] = Field(default_factory=dict)",
        ][kind]
    return [
        f"    f{j}: Annotated[int, Meta(ge=1, description='field {j} of model {i}: how many')] = 1",
        f"    f{j}: Annotated[str, Meta(pattern=r'^[a-z0-9-]{{1,100}}$', description='a name')] = 'x'",
        f"    f{j}: Literal['a', 'b', 'c'] = 'a'",
        f"    f{j}: dict[str, str] = field(default_factory=dict)",
    ][kind]


def module(lib: str) -> str:
    """The models and one validation, as a module's source."""
    if lib == "pydantic":
        head = ["from pydantic import BaseModel, ConfigDict, Field, field_validator", ""]
        cls = "(BaseModel):\n    model_config = ConfigDict(extra='forbid', frozen=True)"
        check = "    @field_validator('f0')\n    @classmethod\n    def _v(cls, v):\n"
        check += "        if v > 10**9:\n            raise ValueError('too big')\n        return v\n"
        nested, validate = "Field(default_factory=M{i})", "Spec.model_validate(DATA)"
    else:
        head = ["import msgspec", "from msgspec import Meta, Struct, field", ""]
        cls = "(Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):"
        check = "    def __post_init__(self):\n"
        check += "        if self.f0 > 10**9:\n            raise ValueError('too big')\n"
        nested, validate = "field(default_factory=M{i})", "msgspec.convert(DATA, Spec)"
    out = ["from __future__ import annotations", "from typing import Annotated, Literal", *head]
    for i in range(MODELS):
        out += [f"class M{i}{cls}", *(_field(lib, i, j) for j in range(FIELDS)), check]
    out += [f"class Spec{cls}", *(f"    m{i}: M{i} = {nested.format(i=i)}" for i in range(MODELS)), ""]
    document = "{'f0': 3, 'f1': 'abc', 'f2': 'b', 'f3': {'A': 'b'}}"
    out += [f"DATA = {{f'm{{i}}': {document} for i in range({MODELS})}}"]
    out += [f"SPEC = {validate}", "assert SPEC.m3.f1 == 'abc'", ""]
    return "\n".join(out)


def instructions(statement: str, path: list[str]) -> float:
    """Millions of instructions of `python -c statement` (children included), run from /."""
    with tempfile.TemporaryDirectory() as out:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(path), "PYTHONHASHSEED": "0"}
        env["PYDANTIC_DISABLE_PLUGINS"] = "1"  # as the CLI runs
        cmd = ["valgrind", "--tool=callgrind", "--trace-children=yes", f"--callgrind-out-file={out}/cg.%p"]
        done = subprocess.run(
            [*cmd, sys.executable, "-c", statement], cwd="/", env=env, capture_output=True, text=True
        )
        if done.returncode != 0:
            raise SystemExit(f"{statement!r} failed:\n{done.stderr[-2000:]}")
        return sum(int(n) for n in re.findall(r"Collected : (\d+)", done.stderr)) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--msgspec", required=True, help="a folder msgspec is installed in (--target)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        for lib in ("pydantic", "msgspec"):
            Path(folder, f"models_{lib}.py").write_text(module(lib))
        path = [folder, args.msgspec]
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPATH"] = os.pathsep.join(path)
        for lib in ("pydantic", "msgspec"):  # compiled once, as an installed package is
            subprocess.run([sys.executable, "-c", f"import models_{lib}"], env=env, check=True)
        floor = instructions("import typer, yaml", path)
        print(f"| `import typer, yaml` | {floor:.0f} |")
        for lib in ("pydantic", "msgspec"):
            total = instructions(f"import typer, yaml, models_{lib}", path)
            print(f"| + the 13 models on {lib}, one validation | {total:.0f} (+{total - floor:.0f}) |")


if __name__ == "__main__":
    main()
