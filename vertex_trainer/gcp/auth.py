"""Credentials and HTTP sessions for every Google API the tool calls (Vertex AI, Cloud Build,
Artifact Registry, Cloud Storage, Cloud Logging).

One rule everywhere: an `http://` endpoint is a local emulator and gets an anonymous plain
session; anything else gets Application Default Credentials, or a clear exit-2 message saying how
to log in (nothing is sent). google-auth and requests are imported only when a session is made.

Impersonation (issue 33): the edge calls `use(settings)` once; with
`settings.impersonate_service_account` set, `credentials()` (and so every session, the storage
client and `access_token()`) is google-auth's impersonated credentials for that account, the ADC
being the source (they need roles/iam.serviceAccountTokenCreator on it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vertex_trainer.errors import ServiceError, UserError
from vertex_trainer.settings import Settings, is_emulator

if TYPE_CHECKING:
    import requests
    from google.auth.credentials import Credentials

SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)
USER_AGENT = "vertex-trainer"

__all__ = [
    "SCOPES",
    "access_token",
    "credentials",
    "impersonating",
    "is_emulator",
    "plain_session",
    "session",
    "use",
]

# What the edge set with use(): the service account every request goes as, and where its tokens
# come from (None: iamcredentials.googleapis.com).
_IMPERSONATE: dict[str, str | None] = {"target": None, "token_url": None}


def use(settings: Settings) -> None:
    """Take this invocation's identity from `settings` (the edge calls it once per command)."""
    target = settings.impersonate_service_account
    _IMPERSONATE["target"] = target
    _IMPERSONATE["token_url"] = (
        f"{settings.iam_url('iamcredentials')}/v1/projects/-/serviceAccounts/{target}:generateAccessToken"
        if target and settings.iam_endpoint
        else None
    )


def impersonating() -> str | None:
    """The service account requests go as, when impersonating."""
    return _IMPERSONATE["target"]


def credentials() -> Credentials:
    """Application Default Credentials, or UserError (exit 2) telling the user how to log in."""
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    try:
        creds, _ = google.auth.default(scopes=list(SCOPES))
    except DefaultCredentialsError as exc:
        raise UserError(
            "no Google Cloud credentials found (Application Default Credentials); nothing was sent",
            hint="run `gcloud auth application-default login` on a workstation; in CI use Workload "
            "Identity Federation (google-github-actions/auth) or the build's service account; "
            "or set GOOGLE_APPLICATION_CREDENTIALS",
        ) from exc
    target = _IMPERSONATE["target"]
    if target:
        from google.auth import impersonated_credentials

        return impersonated_credentials.Credentials(
            source_credentials=creds,
            target_principal=target,
            target_scopes=list(SCOPES),
            iam_endpoint_override=_IMPERSONATE["token_url"],
        )
    return creds


def plain_session() -> requests.Session:
    """A requests session with our User-Agent and no credentials."""
    import requests

    s = requests.Session()
    s.headers["User-Agent"] = f"{USER_AGENT}/{_version()}"
    return s


def session(endpoint: str) -> requests.Session:
    """A requests session for `endpoint`: anonymous for emulators, Google-authorized otherwise."""
    if is_emulator(endpoint):
        return plain_session()
    from google.auth.transport.requests import AuthorizedSession

    s = AuthorizedSession(credentials())
    s.headers["User-Agent"] = f"{USER_AGENT}/{_version()}"
    return s


def access_token() -> str:
    """A fresh OAuth access token from ADC (for APIs that take a bare Bearer token)."""
    from google.auth.transport.requests import Request

    creds = credentials()
    try:
        creds.refresh(Request())
    except Exception as exc:
        raise ServiceError(
            f"could not get an access token: {exc}", hint="run `gcloud auth application-default login`"
        ) from None
    token = creds.token
    if not token:
        raise ServiceError(
            "could not get an access token: the credentials gave none",
            hint="run `gcloud auth application-default login`",
        )
    return str(token)


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("vertex-trainer")
    except Exception:
        return "dev"
