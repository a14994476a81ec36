"""How the Vertex AI Pipelines backend fills a container task's command and args. Pure.

Read from the KFP v2 backend (kubeflow/pipelines backend/src/v2: driver/util.go
`resolveContainerArgs`, component/launcher_v2.go `getPlaceholders`), which the Vertex backend
shares the placeholder language with:

- `{{$}}` is the whole ExecutorInput as JSON;
- `{{$.inputs.parameters['x']}}` a string as is, a number as `strconv.FormatFloat(v, 'f', -1)`
  (1.0 -> "1"), a bool as true/false, a list or struct as JSON; Go's encoders write a whole
  number without a fraction everywhere (`{"0": 100}`, `"boot_disk_size_gb": 100`): GCPC's
  custom-job launcher refuses `100.0` where the API has an integer;
- `{{$.outputs.parameters['x'].output_file}}`, `{{$.outputs.artifacts['x'].uri}}` / `.path`,
  `{{$.inputs.artifacts['x'].uri}}` / `.path` / `.metadata` / `.metadata['k']`;
- `{{$.pipeline_job_uuid}}`, `{{$.pipeline_google_cloud_project_id}}`, ... (Vertex's own,
  also in parameters' default values);
- an arg that is a JSON `{"IfPresent": {"InputName", "Then", "Else"}}` becomes Then's or Else's
  args; `{"Concat": [...]}` the concatenation of its resolved parts.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

_PARAM = re.compile(r"\{\{\$\.inputs\.parameters\['([^']+)'\]\}\}")
_OUT_PARAM = re.compile(r"\{\{\$\.outputs\.parameters\['([^']+)'\]\.output_file\}\}")
_ARTIFACT = re.compile(
    r"\{\{\$\.(inputs|outputs)\.artifacts\['([^']+)'\]\.(uri|path|metadata)"
    r"(?:\['([^']+)'\])?\}\}"
)
_PIPELINE = re.compile(r"\{\{\$\.(pipeline_[a-z_]+)\}\}")


def whole(value: Any) -> Any:
    """`value` with every whole float as an int, recursively (what Go's JSON encoders write)."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: whole(v) for k, v in value.items()}
    if isinstance(value, list):
        return [whole(v) for v in value]
    return value


def to_json(value: Any) -> str:
    """JSON as the backend writes it (compact, whole numbers without a fraction)."""
    return json.dumps(whole(value), separators=(",", ":"))


def text(value: Any) -> str:
    """A parameter value as `{{$.inputs.parameters['x']}}` becomes."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(whole(value)) if float(value).is_integer() else repr(float(value))
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return to_json(value)


def pipeline_values(text_in: str, context: Mapping[str, str]) -> str:
    """Fill `{{$.pipeline_*}}` (job name, uuid, project, location, root, ...) from `context`."""
    return _PIPELINE.sub(lambda m: context.get(m[1], m[0]), text_in)


def resolve_args(args: list[str], executor_input: dict[str, Any], context: Mapping[str, str]) -> list[str]:
    """The args (or command) of a container task, filled as the backend fills them."""
    out: list[str] = []
    for arg in args:
        parsed = _struct(arg)
        if isinstance(parsed, dict) and "IfPresent" in parsed:
            clause = parsed["IfPresent"]
            present = (
                executor_input.get("inputs", {}).get("parameterValues", {}).get(clause["InputName"])
                is not None
            ) or bool(executor_input.get("inputs", {}).get("artifacts", {}).get(clause["InputName"]))
            chosen = clause.get("Then") if present else clause.get("Else")
            chosen = [chosen] if isinstance(chosen, str) else list(chosen or [])
            out.extend(resolve_args(chosen, executor_input, context))
        elif isinstance(parsed, dict) and "Concat" in parsed:
            out.append("".join(resolve_args(list(parsed["Concat"]), executor_input, context)))
        else:
            out.append(resolve(arg, executor_input, context))
    return out


def resolve(arg: str, executor_input: dict[str, Any], context: Mapping[str, str]) -> str:
    """One string with its placeholders filled."""
    inputs, outputs = executor_input.get("inputs", {}), executor_input.get("outputs", {})
    params = inputs.get("parameterValues", {})
    result = _PARAM.sub(lambda m: text(params[m[1]]) if m[1] in params else "", arg)
    result = _OUT_PARAM.sub(
        lambda m: outputs.get("parameters", {}).get(m[1], {}).get("outputFile", ""), result
    )

    def artifact(m: re.Match[str]) -> str:
        side = inputs if m[1] == "inputs" else outputs
        found = (side.get("artifacts", {}).get(m[2]) or {}).get("artifacts") or []
        if not found:
            return ""
        item = found[0]
        if m[3] == "uri":
            return str(item.get("uri", ""))
        if m[3] == "path":
            return local_path(item.get("uri", ""))
        metadata = item.get("metadata") or {}
        return text(metadata.get(m[4])) if m[4] else to_json(metadata)

    result = pipeline_values(_ARTIFACT.sub(artifact, result), context)
    return result.replace("{{$}}", to_json(executor_input))  # last: its text is not a template


def local_path(uri: str) -> str:
    """Where a task reads an artifact: gs://b/x is /gcs/b/x (Cloud Storage FUSE)."""
    return "/gcs/" + uri[len("gs://") :] if uri.startswith("gs://") else uri


def _struct(arg: str) -> Any:
    stripped = arg.strip()
    if not (stripped.startswith('{"IfPresent"') or stripped.startswith('{"Concat"')):
        return None
    try:
        return json.loads(stripped)
    except ValueError:
        return None
