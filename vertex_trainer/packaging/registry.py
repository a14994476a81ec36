"""Does `<repository>:<tag>` exist? One question to a Docker Registry (HTTP API v2).

`HEAD {endpoint}/v2/{path}/manifests/{tag}`; the endpoint is `settings.registry_url(host)` (the
image's registry, or an emulator: the image's host is dropped, its path kept). Google registries
(`*-docker.pkg.dev`, `gcr.io`) get the caller's OAuth access token as a Bearer token; on a Bearer
challenge, the registry's token exchange with `oauth2accesstoken`. 200 -> True, 404 -> False;
401/403 on a Google registry (or with a token) is exit 3 naming the IAM role. Transient failures
(408, 429, 5xx, connection errors) are retried by the shared ApiClient.
"""

from __future__ import annotations

import re

from vertex_trainer.errors import ServiceError, UserError
from vertex_trainer.gcp import auth
from vertex_trainer.gcp.http import TRANSIENT_STATUS, ApiClient
from vertex_trainer.log import Log
from vertex_trainer.settings import Settings
from vertex_trainer.spec import validate_image_reference

_MANIFEST_TYPES = ", ".join(
    [
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    ]
)
_ANSWERS = (401, 403, 404)  # answers, not failures: the caller decides what they mean


def split_image(image: str) -> tuple[str, str, str]:
    """'host/path:tag' -> (registry host, repository path, tag); Docker Hub names get library/."""
    m = validate_image_reference("image", image)
    if not m.group("tag"):
        raise UserError(f"not an image reference with a tag: {image!r}")
    domain = m.group("domain") or "registry-1.docker.io"
    path = m.group("path")
    if domain == "registry-1.docker.io" and "/" not in path:
        path = f"library/{path}"
    return domain, path, m.group("tag")


def is_google_registry(host: str) -> bool:
    return host.endswith("docker.pkg.dev") or host == "gcr.io" or host.endswith(".gcr.io")


def registry_api(settings: Settings, host: str, *, log: Log | None = None) -> ApiClient:
    """The shared HTTP client for one registry. A plain session: the registry takes a bare
    Bearer token (or its own exchanged token), not an OAuth-authorized session."""
    return ApiClient(
        settings.registry_url(host),
        retry=settings.retry,
        log=log,
        session=auth.plain_session(),
        service=f"the registry {host}",
    )


def registry_tag_exists(
    image: str, *, settings: Settings, token: str | None = None, log: Log | None = None
) -> bool:
    """HEAD /v2/<path>/manifests/<tag>. True if the registry has the tag, False if it does not.

    Google registries get the caller's OAuth access token (Bearer; on a token challenge, the
    registry's token exchange with `oauth2accesstoken`). Other registries are asked anonymously;
    if they refuse, the tag is taken as absent (the push will tell)."""
    host, path, tag = split_image(image)
    api = registry_api(settings, host, log=log)
    url = f"v2/{path}/manifests/{tag}"
    op = f"checking {image} in the registry"
    headers = {"Accept": _MANIFEST_TYPES}
    google = is_google_registry(host)
    if token is None and google:
        token = settings.emulator_token if api.emulator else auth.access_token()
    if token:
        headers["Authorization"] = f"Bearer {token}"
    resp = api.call(op, "HEAD", url, headers=headers, allow=_ANSWERS)
    challenge = resp.headers.get("WWW-Authenticate", "")
    if resp.status_code == 401 and token and "bearer" in challenge.lower():
        exchanged = _registry_token(api, challenge, token, path)
        if exchanged:
            headers["Authorization"] = f"Bearer {exchanged}"
            resp = api.call(op, "HEAD", url, headers=headers, allow=_ANSWERS)
    if resp.status_code == 404:
        return False
    if resp.status_code in (401, 403):
        if google or token:
            raise ServiceError(
                f"the registry refused to show {image} (HTTP {resp.status_code})",
                hint="the account needs roles/artifactregistry.reader on the "
                "repository; check `gcloud auth application-default login`",
            )
        if log:
            log(
                f"registry: {host} refused an anonymous check (HTTP {resp.status_code}); "
                "assuming the tag is absent"
            )
        return False
    if resp.status_code == 200:
        return True
    # Another 2xx/3xx to a HEAD is not an answer to "does the tag exist?".
    raise ServiceError(f"{op}: unexpected HTTP {resp.status_code}")


def _registry_token(api: ApiClient, challenge: str, access_token: str, path: str) -> str | None:
    """The registry's own token for `path` (pull scope), from the challenge's realm; None if the
    exchange is refused."""
    params = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
    realm = params.pop("realm", None)
    if not realm:
        return None
    params.setdefault("scope", f"repository:{path}:pull")
    resp = api.call(
        "registry token exchange",
        "GET",
        realm,
        params=params,
        auth=("oauth2accesstoken", access_token),
        allow=[s for s in range(400, 500) if s not in TRANSIENT_STATUS],
    )
    if resp.status_code != 200:
        return None
    body = resp.json()
    token: str | None = body.get("token") or body.get("access_token")
    return token
