"""The house rules of issue 25 that a reviewer would otherwise check by eye: the one pager is the
only code that speaks the page-token protocol, and the optional libraries are imported only
through the lazy adaptor."""

from __future__ import annotations

import ast
from pathlib import Path

from vertex_trainer import lazy

PACKAGE = Path(__file__).resolve().parents[2] / "vertex_trainer"
# The stand-ins serve the protocol (emulators/), the gateway passes a gRPC list's page fields to the
# fake's REST call (sandbox/gateway.py, one page per request); gcp/http.py is the pager. The rest of
# the sandbox lists through the pager like any client (issue 31: sandbox/events.py's bucket poll).
PAGER_EXEMPT = ("gcp/", "emulators/", "sandbox/gateway.py")
# lazy.py is the adaptor; the stand-ins are not host code; dataprep/pipeline.py is the Beam
# pipeline itself, shipped to Dataflow's workers, and imported only after lazy's check.
IMPORT_EXEMPT = ("lazy.py", "emulators/", "sandbox/", "dataprep/pipeline.py")


def _sources(exempt: tuple[str, ...]) -> dict[str, ast.Module]:
    found = {p.relative_to(PACKAGE).as_posix(): p for p in PACKAGE.rglob("*.py")}
    return {
        rel: ast.parse(p.read_text(), filename=rel)
        for rel, p in sorted(found.items())
        if not rel.startswith(exempt)
    }


def page_token_uses(tree: ast.Module) -> list[int]:
    """Lines that name the page-token fields as strings (a hand-written page loop)."""
    return [
        n.lineno
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and n.value in ("nextPageToken", "pageToken")
    ]


def optional_imports(tree: ast.Module) -> list[str]:
    """The imports of a listed optional library (`import kfp`, `from apache_beam.io import x`)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            candidates = [[a.name] for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            # `from kfp import dsl` names kfp; `from google.cloud import aiplatform` its module.
            candidates = [[node.module, f"{node.module}.{a.name}"] for a in node.names]
        else:
            continue
        for names in candidates:
            found = next((n for n in names if _listed(n)), None)
            if found and found not in out:
                out.append(found)
    return out


def _listed(name: str) -> bool:
    try:
        lazy.library_of(name)
    except KeyError:
        return False
    return True


def test_only_the_pager_speaks_the_page_token_protocol():
    sources = _sources(PAGER_EXEMPT)
    assert (
        "vertex/custom_jobs.py" in sources
        and "vertex/job_logs.py" in sources
        and "sandbox/events.py" in sources
    )
    loops = {rel: lines for rel, tree in sources.items() if (lines := page_token_uses(tree))}
    assert loops == {}, "list through gcp.http.ApiClient.pages, the one pager"


def test_optional_libraries_come_through_the_lazy_adaptor():
    sources = _sources(IMPORT_EXEMPT)
    direct = {rel: names for rel, tree in sources.items() if (names := optional_imports(tree))}
    assert direct == {}, "use vertex_trainer.lazy (require/module): one message when it is missing"


def test_the_scanners_see_what_they_look_for():
    loop = ast.parse("token = page.get('nextPageToken')\nparams['pageToken'] = token\n")
    assert page_token_uses(loop) == [1, 2]
    imports = ast.parse(
        "def f():\n    import kfp\n    from apache_beam.io import filesystems\n"
        "    from google.cloud import storage, aiplatform\n"
    )
    assert optional_imports(imports) == ["kfp", "apache_beam.io", "google.cloud.aiplatform"]
