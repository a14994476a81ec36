"""Credentials and HTTP sessions for every Google API the tool calls (Vertex AI, Cloud Build,
Artifact Registry, Cloud Storage).

One rule everywhere: an `http://` endpoint is a local emulator and gets an anonymous plain
session; anything else gets Application Default Credentials, or a clear exit-2 message saying how
to log in (nothing is sent). google-auth and requests are imported only when a session is made.
"""

from __future__ import annotations

SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)
USER_AGENT = "vertex-trainer"


def is_emulator(endpoint: str) -> bool:
    """An http:// endpoint is an emulator: anonymous credentials, plain HTTP."""
    return endpoint.startswith("http://")


def credentials():
    """Application Default Credentials, or UserError (exit 2) telling the user how to log in."""
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    from vertex_trainer.errors import UserError

    try:
        creds, _ = google.auth.default(scopes=list(SCOPES))
    except DefaultCredentialsError as exc:
        raise UserError(
            "no Google Cloud credentials found (Application Default Credentials); nothing was sent",
            hint="run `gcloud auth application-default login` on a workstation; in CI use Workload "
                 "Identity Federation (google-github-actions/auth) or the build's service account; "
                 "or set GOOGLE_APPLICATION_CREDENTIALS") from exc
    return creds


def session(endpoint: str):
    """A requests session for `endpoint`: anonymous for emulators, Google-authorized otherwise."""
    import requests

    if is_emulator(endpoint):
        s = requests.Session()
    else:
        from google.auth.transport.requests import AuthorizedSession

        s = AuthorizedSession(credentials())
    s.headers["User-Agent"] = f"{USER_AGENT}/{_version()}"
    return s


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("vertex-trainer")
    except Exception:  # noqa: BLE001 - a missing distribution only changes the User-Agent
        return "dev"
