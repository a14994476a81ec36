"""Your model in the bundled trainer: `trainer.model: package.module:function` (docs/own-code.md).

A factory job is `image.code: DIR` with no `image.script` / `image.module`, and a `trainer:`
block whose `model` names a Keras model factory found in DIR. The bundled trainer calls it as

    function(num_classes=..., image_size=..., dtype=...) -> tf_keras.Model

(trainer/factory.py). Here: the spec's rules (`factory_rules`, run by JobSpec's validator) and
the check that the factory imports and takes those arguments (`check_factory`, before anything
is built or run): a short Python process with DIR first on its path imports the module and
inspects the function, so TensorFlow is imported only if the module imports it at its top.

The model may be tf-keras or Keras 3: `trainer.keras: auto` (the default) is the Keras the
factory's module imports, read from its source (trainer/keras_choice.py, nothing imported), and
resolved in the rendered args (`trainer_args`: `--keras=3`), so a dry run shows what is sent.
`check_factory` refuses, naming the field and the fix, where Keras 3 cannot train: several
machines (`replicas`), or steps_per_execution > 1 on several devices.
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from trainer.flags import FACTORY_PATTERN
from vertex_trainer.errors import SpecError
from vertex_trainer.spec.images import code_root

if TYPE_CHECKING:  # model.py imports this module (directly or through the rules): named for the type checker
    from vertex_trainer.spec.model import JobSpec
    from vertex_trainer.spec.trainer import TrainerArgs
FACTORY_RE = re.compile(FACTORY_PATTERN)
RESERVED = ("trainer",)  # the bundled trainer's own package: a factory's package may not shadow it
SIGNATURE = "function(num_classes: int, image_size: int, dtype: str) -> keras.Model (tf-keras or Keras 3)"
CHECK_TIMEOUT_S = 300.0  # a module that imports TensorFlow at its top takes seconds


def is_factory(model: str | None) -> bool:
    """True when trainer.model names a model factory (package.module:function)."""
    return bool(model) and FACTORY_RE.fullmatch(str(model)) is not None


def trainer_of(spec: JobSpec) -> TrainerArgs:
    """The trainer block of a job that runs the bundled trainer (ValueError for any other)."""
    if spec.trainer is None:
        raise ValueError("not a bundled-trainer job: the spec has no trainer block")
    return spec.trainer


def runs_factory(spec: JobSpec) -> bool:
    """True when the job runs the bundled trainer with your model factory from image.code."""
    image, trainer = spec.image, spec.trainer
    return bool(
        image is not None
        and image.code
        and not image.runs_code
        and trainer is not None
        and is_factory(trainer.model)
    )


def factory_rules(spec: JobSpec) -> None:
    """image.code and trainer.model go together (docs/contract.md section 14).

    - trainer.model: package.module:function needs image.code (the directory holding it), or
      image.uri (an image built elsewhere that holds it: a factory job's image, pinned);
    - image.code with neither image.script nor image.module needs such a trainer.model;
    - trainer.keras: 3 needs such a trainer.model (the built-in models are tf-keras);

    Raises:
        SpecError: the field, its value and the fix (exit 2).
    """
    image, trainer = spec.image, spec.trainer
    model = trainer.model if trainer is not None else None
    code = image.code if image is not None else None
    if trainer is not None and trainer.keras == "3" and not is_factory(model) and spec.runs_bundled_trainer:
        raise SpecError(
            "trainer.keras",
            f"is 3, but trainer.model {model} is a built-in model of the bundled trainer, which is tf-keras",
            value="3",
            hint="remove trainer.keras (Keras 3 is for your own model factory: package.module:function)",
        )
    if is_factory(model):
        if not code and image is not None and image.uri:
            return  # an image built elsewhere (e.g. a factory job's, pinned by `trigger`) holds it
        if not code:
            raise SpecError(
                "trainer.model",
                "names a model factory (package.module:function), which is found in image.code; "
                "the spec has no image.code",
                value=model,
                hint="add image.code: DIR (the directory holding the module) with image.repository; "
                "or name a built-in model (vertex-trainer schema lists them)",
            )
        if image is not None and image.runs_code:
            return  # a script job: _what_runs (spec/model.py) refuses its trainer: block
        module = str(model).split(":", 1)[0]
        if module.split(".")[0] in RESERVED:
            raise SpecError(
                "trainer.model",
                f"the package {module.split('.')[0]!r} is the bundled trainer's own: yours would shadow it",
                value=model,
                hint="rename your package (e.g. models.net:build)",
            )
        return
    if image is not None and code and not image.runs_code:
        meant = _factory_meant(str(model)) if model else None
        if meant:  # a file path or a module without its function: a factory, misspelt
            raise SpecError(
                "trainer.model",
                "is not package.module:function (a module under image.code, a colon, the function)",
                value=model,
                hint=f"trainer.model: {meant}"
                + (" (FUNCTION: your factory's name)" if meant.endswith(":FUNCTION") else ""),
            )
        raise SpecError(
            "image.code",
            "needs image.script or image.module (neither is set) to run your own script, or "
            "trainer.model: package.module:function to train your Keras model in the bundled trainer"
            + (f"; trainer.model is {model!r}" if model else ""),
            value=code,
            hint="image.script: task.py runs `python task.py`; trainer.model: models.net:build "
            "trains models/net.py's build() with the bundled trainer",
        )


def _factory_meant(model: str) -> str | None:
    """The package.module:function a trainer.model that is none most likely means, or None (a
    bundled model's name has no '/', '.' or ':'): models/net.py:build and ./models/net.py:build
    -> models.net:build; models.net (no function) -> models.net:FUNCTION."""
    if not any(c in model for c in "/.:"):
        return None
    module, _, function = model.partition(":")
    module = module.strip().removeprefix("./").removesuffix(".py").replace("/", ".").strip(".")
    meant = f"{module}:{function.strip() or 'FUNCTION'}"
    if meant == model or not FACTORY_RE.fullmatch(meant.replace("FUNCTION", "build")):
        return None
    return meant


def check_factory(spec: JobSpec) -> None:
    """The factory must import from image.code and take the trainer's keyword arguments.

    Runs `python -I` with image.code first on sys.path: it imports the module, finds the
    function and binds num_classes, image_size and dtype to its signature. (That it returns a
    Keras model of the right shape, the trainer checks when it builds it: exit 2 then.)

    Args:
        spec: a factory job's JobSpec (runs_factory).
    Raises:
        SpecError: field trainer.model, the value and the fix (exit 2).
    """
    root = code_root(spec)
    model = trainer_of(spec).model
    problem = _probe(str(root), model, _stamp(root))
    if problem is not None:
        raise SpecError(
            "trainer.model",
            f"{problem} (image.code is {root})",
            value=model,
            hint=f"the factory is {SIGNATURE}, in a module under image.code: models/net.py "
            "holding build() is models.net:build (docs/own-code.md)",
        )
    keras_rules(spec)


def keras_of(spec: JobSpec) -> tuple[str, str]:
    """(major, why): the Keras that trains a factory job's model, "2" or "3" (trainer.keras, or
    auto: what the factory's module imports under image.code).

    Raises:
        SpecError: auto, and the module imports both Keras 3 and tf-keras (field trainer.keras).
    """
    # pure (ast), imported when a factory is checked: at load the spec imports only the trainer's
    # flag table (tests/foundation: test_the_spec_imports_only_the_trainers_flag_table)
    from trainer import keras_choice

    trainer = trainer_of(spec)
    requested = trainer.keras or "auto"
    if requested != "auto":
        return requested, f"trainer.keras: {requested}"
    try:
        return keras_choice.choose(requested, trainer.model, [str(code_root(spec))], is_factory=True)
    except ValueError as e:
        raise SpecError(
            "trainer.keras",
            f"is auto, and {e}",
            value=requested,
            hint="trainer.keras: 3 (import keras) or 2 (tf_keras); better, import one Keras only",
        ) from None


def keras_rules(spec: JobSpec) -> None:
    """Keras 3 trains on one machine, at steps_per_execution 1 when it has several devices
    (measured with Keras 3.15.1: trainer/keras_choice.py). Where it cannot: SpecError naming
    `replicas` or `trainer.steps_per_execution`, the reason and the fix (exit 2)."""
    from trainer import keras_choice  # a factory's check only (keras_of)

    major, why = keras_of(spec)
    trainer = trainer_of(spec)
    devices = max(spec.hardware.devices, trainer.cpu_replicas or 1)
    refusal = keras_choice.limits(
        major,
        replicas=devices * spec.replicas,
        workers=spec.replicas,
        steps_per_execution=trainer.steps_per_execution or 0,
    )
    if refusal is None:
        return
    if spec.replicas > 1:
        raise SpecError(
            "replicas",
            f"{spec.replicas} machines train trainer.model {trainer.model}, a Keras 3 model ({why}): "
            f"{refusal}",
            value=spec.replicas,
            hint="replicas: 1 (one machine trains on all its GPUs, MirroredStrategy, at "
            "steps_per_execution 1); or write the model with tf_keras (`import tf_keras as keras`)",
        )
    raise SpecError(
        "trainer.steps_per_execution",
        f"{trainer.steps_per_execution} on {devices} devices, for trainer.model {trainer.model}, a "
        f"Keras 3 model ({why}): {refusal}",
        value=trainer.steps_per_execution,
        hint="remove it (the trainer then runs Keras 3 at 1 here) or set 1; or write the model with "
        "tf_keras (`import tf_keras as keras`) to keep steps_per_execution > 1",
    )


def trainer_args(spec: JobSpec) -> list[str]:
    """The bundled trainer's args of a job (trainer.to_args()), with a factory job's trainer.keras
    resolved (auto -> --keras=2 or 3, what the factory imports), so what is sent says it."""
    trainer = trainer_of(spec)
    args: list[str] = trainer.to_args()
    if not runs_factory(spec) or trainer.keras not in (None, "auto"):
        return args
    try:
        major, _ = keras_of(spec)
    except SpecError:  # refused by check_factory before anything is sent; the trainer decides
        return args
    own = len(args) - len(trainer.extra_args)  # the flags' args, then extra_args verbatim
    return [*args[:own], f"--keras={major}", *args[own:]]


def keras_words(spec: JobSpec) -> str:
    """'Keras 3 (models/net.py line 2: import keras)' for a factory job ('' if not one)."""
    if not runs_factory(spec):
        return ""
    from trainer import keras_choice  # a factory's only (keras_of)

    try:
        major, why = keras_of(spec)
    except SpecError:
        return ""
    return f"{keras_choice.NAMES[major]} ({why})"


def _stamp(root: Path) -> tuple[tuple[str, int, int], ...]:
    """The .py files under root with their mtimes and sizes: a changed module is checked again."""
    out = []
    for path in sorted(root.rglob("*.py")):
        if "__pycache__" in path.parts or ".git" in path.parts:
            continue
        st = path.stat()
        out.append((str(path.relative_to(root)), st.st_mtime_ns, st.st_size))
    return tuple(out)


# Run in a process of its own (`python -I -c`): stdlib only, prints one JSON line.
_PROBE = r"""
import importlib, inspect, json, os, sys, traceback
root, model = sys.argv[1], sys.argv[2]
module_name, function_name = model.split(":", 1)
sys.path.insert(0, root)
def answer(problem):
    print("\n" + json.dumps({"problem": problem}))
    sys.exit(0)
try:
    module = importlib.import_module(module_name)
except ModuleNotFoundError as e:
    if e.name and (module_name == e.name or module_name.startswith(e.name + ".")):
        parts = module_name.split(".")
        answer("no module %r in image.code (neither %s.py nor %s/__init__.py)"
               % (module_name, "/".join(parts), "/".join(parts)))
    answer("importing %s failed: no module named %r (a requirement? add it to image.requirements "
           "and install it here)" % (module_name, e.name))
except BaseException as e:
    last = traceback.extract_tb(e.__traceback__)[-1]
    answer("importing %s failed: %s: %s (%s line %s)"
           % (module_name, type(e).__name__, str(e).strip().splitlines()[0] if str(e).strip() else "",
              os.path.basename(last.filename), last.lineno))
where = os.path.realpath(getattr(module, "__file__", None) or "")
if not where.startswith(os.path.realpath(root) + os.sep):
    answer("module %r is not in image.code: it was found at %s" % (module_name, where or "a built-in"))
if not hasattr(module, function_name):
    found = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_")
                   and getattr(v, "__module__", None) == module.__name__)
    answer("%s has no %r%s" % (module_name, function_name,
           " (it defines: %s)" % ", ".join(found) if found else ""))
function = getattr(module, function_name)
if not callable(function):
    answer("%s.%s is not callable (a %s)" % (module_name, function_name, type(function).__name__))
try:
    signature = inspect.signature(function)
except (TypeError, ValueError):
    answer(None)
try:
    signature.bind(num_classes=10, image_size=32, dtype="float32")
except TypeError as e:
    answer("%s%s cannot be called with num_classes=, image_size=, dtype= (%s)"
           % (function_name, signature, e))
answer(None)
"""


@functools.lru_cache(maxsize=32)
def _probe(root: str, model: str, stamp: tuple[tuple[str, int, int], ...]) -> str | None:
    """The problem the probe found (None: the factory is fine). Cached per directory state."""
    del stamp  # part of the cache key only
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-c", _PROBE, root, model],
            capture_output=True,
            text=True,
            timeout=CHECK_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"importing it took over {CHECK_TIMEOUT_S:g} s"
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return f"importing it ended the checking process (exit {done.returncode}): {tail}"
    problem: str | None = json.loads(lines[-1])["problem"]
    return problem
