"""Which Keras trains the model: tf-keras (Keras 2) or Keras 3 (`--keras`, docs/own-code.md).

Built-in models are tf-keras. A model factory (package.module:function) is trained with the
Keras its module imports, read from its source with `ast` (nothing is imported, so the choice is
made before TensorFlow loads, and vertex-trainer's `validate` reads it the same way):

  import keras, from keras import layers, import keras.layers      -> 3
  import tf_keras, from tensorflow import keras, tf.keras.layers     -> 2 (the trainer maps
                                                                        tf.keras to tf-keras)

Modules the factory's module imports from the same code directory are read too. A module that
names neither is 2 (tf-keras, as before Keras 3 was accepted); one that imports both is refused
unless `--keras=2|3` says which.

Keras 3 (3.15.1, with TensorFlow 2.21) trains on one replica and on several replicas of one
machine (MirroredStrategy) with steps_per_execution 1; it fails with steps_per_execution > 1 on
several replicas, and under MultiWorkerMirroredStrategy (several machines) at any
steps_per_execution. `limits` says so before anything is built. Stdlib only: vertex-trainer
imports this module (spec/factory.py). `select` (trainer.task, before TensorFlow loads) and
`fit_view` are the trainer's own uses.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainer.config import TrainConfig

# The Keras of the built-in models, and of a factory whose module names no Keras at all.
DEFAULT = "2"
MAX_MODULES = 200  # the most modules of the code directory read for one factory
NAMES = {"2": "tf-keras (Keras 2)", "3": "Keras 3"}
# Why Keras 3 cannot run there (measured: docs/trainer.md "Why tf-keras").
MULTI_WORKER = (
    "Keras 3.15 fails under MultiWorkerMirroredStrategy (several machines) even at "
    "steps_per_execution 1 ('Attempt to convert a value (PerReplica...)')"
)
SEVERAL_REPLICAS = (
    "Keras 3.15 fails with steps_per_execution > 1 on several replicas (MirroredStrategy: "
    "'You must feed a value for placeholder tensor')"
)

BUILT_IN_3 = (
    "--keras=3 is for a model factory (package.module:function); {model} is a built-in model, "
    "which is tf-keras: leave --keras out"
)


@dataclasses.dataclass(frozen=True)
class Found:
    """What a factory's source imports: the Keras it names (None: neither) and where."""

    major: str | None  # "2", "3" or None
    where: str  # e.g. "models/net.py line 3: import keras"; "" when major is None
    conflict: str = ""  # both: "models/net.py line 3: import keras (Keras 3) and ... (tf-keras)"


def detect(model: str, roots: Sequence[str]) -> Found:
    """The Keras `model`'s module (package.module:function) imports, found under `roots`.

    Args:
        model: package.module:function.
        roots: directories the module is found under (image.code; the trainer's sys.path).
    Returns:
        Found; major None when the module is not found or imports no Keras.
    """
    module = model.partition(":")[0]
    first = _find(module, roots)
    if first is None:
        return Found(None, "")
    # The modules it imports are followed in its own directory only, and not at all when it is
    # an installed package (site-packages: its imports are other people's packages).
    installed = any(part in ("site-packages", "dist-packages") for part in first[1].split(os.sep))
    seen: dict[str, tuple[str, str]] = {}  # major -> (file, line: statement), the first of each
    todo, visited = [module], set[str]()
    while todo and len(visited) < MAX_MODULES:
        name = todo.pop(0)
        if name in visited or (name != module and (installed or _major(name))):
            continue
        visited.add(name)
        found = _find(name, [first[1]])
        if found is None:
            continue
        path, root, is_package = found
        try:
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read(), filename=path)
        except (OSError, SyntaxError, ValueError):
            continue  # the import fails, and says why, where it is checked
        package = name if is_package else name.rpartition(".")[0]
        rel = os.path.relpath(path, root)
        for major, line, text, imported in _imports(tree, package):
            if major is not None:
                seen.setdefault(major, (rel, f"line {line}: {text}"))
            todo.extend(m for m in imported if m not in visited)
    if "2" in seen and "3" in seen:
        (f3, w3), (f2, w2) = seen["3"], seen["2"]
        return Found(None, "", f"{f3} {w3} (Keras 3) and {f2} {w2} (tf-keras)")
    for major in ("3", "2"):
        if major in seen:
            return Found(major, " ".join(seen[major]))
    return Found(None, "")


def _find(module: str, roots: Sequence[str]) -> tuple[str, str, bool] | None:
    """(file, root, is_package) of `module` under the first root holding it (None: not there)."""
    parts = module.split(".")
    for root in roots:
        base = os.path.join(root, *parts)
        if os.path.isfile(base + ".py"):
            return base + ".py", root, False
        if os.path.isfile(os.path.join(base, "__init__.py")):
            return os.path.join(base, "__init__.py"), root, True
    return None


def _imports(tree: ast.AST, package: str) -> list[tuple[str | None, int, str, list[str]]]:
    """(major or None, line, statement, modules it imports) for each import and tf.keras use."""
    out: list[tuple[str | None, int, str, list[str]]] = []
    tensorflow_names = {"tensorflow"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "tensorflow":
                    tensorflow_names.add(alias.asname or "tensorflow")
                text = f"import {alias.name}"
                out.append((_major(alias.name), node.lineno, text, [alias.name]))
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, package)
            names = [a.name for a in node.names]
            text = f"from {'.' * node.level}{node.module or ''} import {', '.join(names)}"
            major = _major(base)
            if base == "tensorflow" and "keras" in names:
                major = "2"
            out.append((major, node.lineno, text, [base] + [f"{base}.{n}" for n in names if n != "*"]))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr == "keras"
            and isinstance(node.value, ast.Name)
            and node.value.id in tensorflow_names
        ):
            out.append(("2", node.lineno, f"{node.value.id}.keras", []))
    return out


def _major(module: str) -> str | None:
    top = module.split(".")[0]
    if top == "keras":
        return "3"
    if (
        top == "tf_keras"
        or module.startswith("tensorflow.keras")
        or module.startswith("tensorflow.python.keras")
    ):
        return "2"
    return None


def _absolute(node: ast.ImportFrom, package: str) -> str:
    if not node.level:
        return node.module or ""
    parts = package.split(".") if package else []
    base = parts[: len(parts) - (node.level - 1)] if node.level > 1 else parts
    return ".".join(base + ([node.module] if node.module else []))


def choose(requested: str, model: str, roots: Sequence[str], *, is_factory: bool) -> tuple[str, str]:
    """(major, why): the Keras that trains `model`.

    Args:
        requested: --keras (auto, 2 or 3).
        model: --model (a built-in name or package.module:function).
        roots: where a factory's module is found.
        is_factory: whether `model` names a factory.
    Raises:
        ValueError: auto, and the factory's source imports both Keras 3 and tf-keras; or 3 for a
            built-in model.
    """
    if not is_factory:
        if requested == "3":
            raise ValueError(BUILT_IN_3.format(model=model))
        return DEFAULT, "a built-in model"
    found = detect(model, roots)
    if requested in NAMES:  # said: it wins; the line it agrees with, if any, is the reason shown
        return requested, found.where if found.major == requested else f"--keras={requested}"
    if found.conflict:
        raise ValueError(
            f"{model} imports both Keras 3 and tf-keras: {found.conflict}; one model cannot mix "
            "them: import one, or say which trains it (--keras=3 or --keras=2)"
        )
    if found.major is None:
        return DEFAULT, f"{model.partition(':')[0]} imports no Keras: tf-keras, the default"
    return found.major, f"{found.where}"


def limits(major: str, *, replicas: int, workers: int, steps_per_execution: int) -> str | None:
    """Why `major` cannot train on this many replicas at this steps_per_execution (None: it can).

    steps_per_execution 0 is automatic: `cap_steps_per_execution` makes it 1 where it must.
    """
    if major != "3":
        return None
    if workers > 1:
        return MULTI_WORKER
    if replicas > 1 and steps_per_execution > 1:
        return SEVERAL_REPLICAS
    return None


def cap_steps_per_execution(major: str, replicas: int) -> str | None:
    """Why the automatic steps_per_execution must be 1 for `major` here (None: no cap)."""
    if major == "3" and replicas > 1:
        return f"steps_per_execution 1: {SEVERAL_REPLICAS}"
    return None


def select(cfg: TrainConfig) -> TrainConfig:
    """cfg with --keras resolved to 2 or 3, and TF_USE_LEGACY_KERAS set to match, so
    trainer._keras, and TensorFlow's tf.keras, load that Keras (trainer.task calls it before
    anything imports TensorFlow).

    Raises:
        UsageError: a factory's source imports both Kerases; --keras=3 for a built-in model; or
            this process already loaded the other Keras (in-process callers: one Keras a process).
    """
    from trainer import factory
    from trainer.config import UsageError
    from trainer.log import log

    roots = [p or os.getcwd() for p in sys.path]
    try:
        major, why = choose(cfg.keras, cfg.model, roots, is_factory=factory.is_factory(cfg.model))
    except ValueError as e:  # both Kerases imported; --keras=3 for a built-in model
        raise UsageError(f"--model={cfg.model}: {e}") from None
    loaded = sys.modules.get("trainer._keras")
    if loaded is not None and loaded.MAJOR != major:
        raise UsageError(
            f"--model={cfg.model} trains with {NAMES[major]} ({why}), but this process "
            f"already loaded {loaded.NAME}; run it in a process of its own"
        )
    os.environ["TF_USE_LEGACY_KERAS"] = "1" if major == "2" else "0"
    if major != DEFAULT:
        log(f"{NAMES[major]} trains {cfg.model} ({why})")
    return dataclasses.replace(cfg, keras=major)


def fit_view(dataset: Any, timed: Any) -> Any:
    """`dataset` (a distributed dataset) as Keras 3's fit accepts it, iterating as `timed` does
    (the input-wait meter's wrapper: every get_next timed). Keras 3 takes only TensorFlow's own
    dataset classes (it checks their names), so this is a copy of `dataset` whose class is a
    subclass of its own with `timed`'s iterators; `timed` itself reads the original."""
    base = type(dataset)
    view = copy.copy(dataset)
    view.__class__ = type(base.__name__, (base,), {"__iter__": lambda self: iter(timed)})
    return view
