"""Settings: everything the tool takes from its environment, read once at the edge.

The CLI and the Python API call `Settings.from_environ(os.environ)` once; every layer below gets
the resulting frozen object (or the one value it needs) as an argument and never reads
`os.environ` itself. Tests build a `Settings(...)` directly.

| variable | field |
|---|---|
| VERTEX_TRAINER_API_ENDPOINT | vertex_endpoint (an http:// URL is an emulator) |
| VERTEX_TRAINER_CLOUDBUILD_ENDPOINT | cloudbuild_endpoint |
| VERTEX_TRAINER_REGISTRY_ENDPOINT | registry_endpoint |
| VERTEX_TRAINER_LOGGING_ENDPOINT | logging_endpoint |
| VERTEX_TRAINER_QUOTAS_ENDPOINT | quotas_endpoint (Cloud Quotas API, the quota pre-flight) |
| VERTEX_TRAINER_BILLING_ENDPOINT | billing_endpoint (Cloud Billing Catalog API, prices) |
| VERTEX_TRAINER_BILLING_API_KEY | billing_api_key (an API key for the Catalog API instead of ADC) |
| VERTEX_TRAINER_SERVICEUSAGE_ENDPOINT | serviceusage_endpoint (Service Usage: `check`, `setup`) |
| VERTEX_TRAINER_IAM_ENDPOINT | iam_endpoint (Resource Manager, IAM, Artifact Registry: one stand-in) |
| VERTEX_TRAINER_MONITORING_ENDPOINT | monitoring_endpoint (Cloud Monitoring: `status --utilization`) |
| VERTEX_TRAINER_IMPERSONATE_SERVICE_ACCOUNT, else gcloud's (env, config) | impersonate_service_account |
| STORAGE_EMULATOR_HOST | storage_emulator (google-cloud-storage's own switch) |
| VERTEX_TRAINER_EMULATOR_TOKEN | emulator_token (the Bearer token a sandbox's stand-ins require) |
| VERTEX_TRAINER_REPLICA_NETWORK | replica_network ("private", the default, or "host": docs/local.md) |
| VERTEX_TRAINER_RETRY | retry ("attempts=4,initial=0.01,deadline=5") |
| VERTEX_TRAINER_POLL_INTERVAL | poll (first interval in seconds) |
| VERTEX_TRAINER_DEBUG | debug ("1") |
| GOOGLE_CLOUD_PROJECT, CLOUDSDK_CORE_PROJECT, gcloud's core/project | project |
| CLOUDSDK_AI_REGION, gcloud's ai/region | region |
| CLOUDSDK_CONFIG | where gcloud's configuration is read from |
"""

from __future__ import annotations

import configparser
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from vertex_trainer.errors import UserError

ENDPOINT_ENV = "VERTEX_TRAINER_API_ENDPOINT"
CLOUDBUILD_ENV = "VERTEX_TRAINER_CLOUDBUILD_ENDPOINT"
REGISTRY_ENV = "VERTEX_TRAINER_REGISTRY_ENDPOINT"
LOGGING_ENV = "VERTEX_TRAINER_LOGGING_ENDPOINT"
QUOTAS_ENV = "VERTEX_TRAINER_QUOTAS_ENDPOINT"
BILLING_ENV = "VERTEX_TRAINER_BILLING_ENDPOINT"
BILLING_KEY_ENV = "VERTEX_TRAINER_BILLING_API_KEY"
SERVICEUSAGE_ENV = "VERTEX_TRAINER_SERVICEUSAGE_ENDPOINT"
IAM_ENV = "VERTEX_TRAINER_IAM_ENDPOINT"
MONITORING_ENV = "VERTEX_TRAINER_MONITORING_ENDPOINT"
IMPERSONATE_ENV = "VERTEX_TRAINER_IMPERSONATE_SERVICE_ACCOUNT"
STORAGE_EMULATOR_ENV = "STORAGE_EMULATOR_HOST"
RETRY_ENV = "VERTEX_TRAINER_RETRY"
POLL_ENV = "VERTEX_TRAINER_POLL_INTERVAL"
DEBUG_ENV = "VERTEX_TRAINER_DEBUG"
EMULATOR_TOKEN_ENV = "VERTEX_TRAINER_EMULATOR_TOKEN"
REPLICA_NETWORK_ENV = "VERTEX_TRAINER_REPLICA_NETWORK"
REPLICA_NETWORKS = ("private", "host")

STORAGE_URL = "https://storage.googleapis.com"
CLOUDBUILD_URL = "https://cloudbuild.googleapis.com"
LOGGING_URL = "https://logging.googleapis.com"
QUOTAS_URL = "https://cloudquotas.googleapis.com"
BILLING_URL = "https://cloudbilling.googleapis.com"
SERVICEUSAGE_URL = "https://serviceusage.googleapis.com"
MONITORING_URL = "https://monitoring.googleapis.com"
# `check` and `setup` (issue 33): one endpoint setting stands for these three APIs (the sandbox
# serves them from one stand-in); unset, each is its own Google host.
IAM_URLS = {
    "cloudresourcemanager": "https://cloudresourcemanager.googleapis.com",
    "iam": "https://iam.googleapis.com",
    "artifactregistry": "https://artifactregistry.googleapis.com",
    "iamcredentials": "https://iamcredentials.googleapis.com",  # impersonation's tokens
}


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter, bounded in attempts and in total time."""

    attempts: int = 6
    initial: float = 1.0
    maximum: float = 20.0
    multiplier: float = 2.0
    deadline: float = 120.0
    connect_timeout: float = 10.0
    read_timeout: float = 60.0

    @classmethod
    def parse(cls, text: str) -> RetryPolicy:
        """ "attempts=4,initial=0.01,deadline=5" -> RetryPolicy (unknown keys are exit 2)."""
        values: dict[str, Any] = {}
        names = [f.name for f in fields(cls)]
        for item in filter(None, (part.strip() for part in text.split(","))):
            key, _, value = item.partition("=")
            key = key.strip().replace("-", "_")
            if key not in names:
                raise UserError(f"${RETRY_ENV}: unknown setting {key!r} (known: {', '.join(names)})")
            try:
                values[key] = int(value) if key == "attempts" else float(value)
            except ValueError:
                raise UserError(f"${RETRY_ENV}: {key}={value!r} is not a number") from None
            # nan, inf and negatives parse as floats; each would end in a traceback at the first
            # wait (time.sleep) or never end; a timeout of 0 is no timeout for requests
            least = 1 if key in ("attempts", "multiplier") else 0
            if (
                not math.isfinite(values[key])
                or values[key] < least
                or (key.endswith("timeout") and values[key] == 0)
            ):
                more = "more than 0" if key.endswith("timeout") else f"at least {least}"
                raise UserError(f"${RETRY_ENV}: {key}={value.strip()!r} must be a number {more}")
        return cls(**values)


@dataclass(frozen=True)
class PollPolicy:
    """Adaptive polling: start fast, slow down while nothing changes, speed up on a change."""

    initial: float = 5.0
    maximum: float = 60.0
    multiplier: float = 1.5

    @classmethod
    def parse(cls, text: str) -> PollPolicy:
        try:
            initial = float(text)
        except ValueError:
            raise UserError(f"${POLL_ENV}={text!r} is not a number of seconds") from None
        if not initial > 0 or not math.isfinite(initial):  # (nan is not > 0)
            raise UserError(f"${POLL_ENV}={text!r} must be a number of seconds more than 0")
        return cls(initial=initial, maximum=max(initial, min(60.0, initial * 12)))

    def intervals(self) -> Iterator[float]:
        delay = self.initial
        while True:
            yield delay
            delay = min(delay * self.multiplier, self.maximum)


def is_emulator(endpoint: str | None) -> bool:
    """An http:// endpoint is an emulator: anonymous credentials, plain HTTP."""
    return endpoint is not None and endpoint.startswith("http://")


@dataclass(frozen=True)
class Settings:
    """Endpoints, policies and defaults for one invocation. Frozen; pass it down."""

    vertex_endpoint: str | None = None  # None: https://{region}-aiplatform.googleapis.com
    cloudbuild_endpoint: str | None = None
    registry_endpoint: str | None = None  # None: https://<the image's registry host>
    logging_endpoint: str | None = None
    quotas_endpoint: str | None = None  # None: https://cloudquotas.googleapis.com
    billing_endpoint: str | None = None  # None: https://cloudbilling.googleapis.com
    billing_api_key: str | None = field(default=None, repr=False)  # else ADC
    serviceusage_endpoint: str | None = None  # None: https://serviceusage.googleapis.com
    iam_endpoint: str | None = None  # None: each of IAM_URLS
    monitoring_endpoint: str | None = None  # None: https://monitoring.googleapis.com
    # Every request goes as this service account (google-auth's impersonated credentials, the
    # caller's ADC as the source); None: as the ADC themselves.
    impersonate_service_account: str | None = None
    storage_emulator: str | None = None  # host:port or URL of a Cloud Storage emulator
    # What every http:// endpoint (an emulator) is sent as `Authorization: Bearer`: the token
    # `dev sandbox` prints; None: nothing (a plain stand-in needs none).
    emulator_token: str | None = field(default=None, repr=False)
    # A local run's replicas, when they are more than one: in a private network ("private") or on
    # this machine's ("host"; their TensorFlow servers then listen on every interface).
    replica_network: str = "private"
    retry: RetryPolicy = RetryPolicy()
    poll: PollPolicy = PollPolicy()
    debug: bool = False
    project: str | None = None  # the default project (a spec or flag wins)
    region: str | None = None  # the default region (a spec or flag wins)
    # The process environment as it was at the edge: feeds `{{ env.NAME }}` in specs and the
    # environment of locally run replicas. Not consulted for anything else.
    environ: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)

    # -- endpoints ------------------------------------------------------------------------
    def vertex_url(self, region: str) -> str:
        return (self.vertex_endpoint or f"https://{region}-aiplatform.googleapis.com").rstrip("/")

    def cloudbuild_url(self) -> str:
        return (self.cloudbuild_endpoint or CLOUDBUILD_URL).rstrip("/")

    def registry_url(self, host: str) -> str:
        return (self.registry_endpoint or f"https://{host}").rstrip("/")

    def logging_url(self) -> str:
        return (self.logging_endpoint or LOGGING_URL).rstrip("/")

    def quotas_url(self) -> str:
        return (self.quotas_endpoint or QUOTAS_URL).rstrip("/")

    def billing_url(self) -> str:
        return (self.billing_endpoint or BILLING_URL).rstrip("/")

    def serviceusage_url(self) -> str:
        return (self.serviceusage_endpoint or SERVICEUSAGE_URL).rstrip("/")

    def monitoring_url(self) -> str:
        return (self.monitoring_endpoint or MONITORING_URL).rstrip("/")

    def iam_url(self, api: str) -> str:
        """Resource Manager, IAM or Artifact Registry (`api`: a key of IAM_URLS)."""
        return (self.iam_endpoint or IAM_URLS[api]).rstrip("/")

    def storage_url(self) -> str:
        """The Cloud Storage JSON API root: the emulator when one is set."""
        emulator = self.storage_emulator
        if not emulator:
            return STORAGE_URL
        return (emulator if "://" in emulator else f"http://{emulator}").rstrip("/")

    @property
    def offline(self) -> bool:
        """True when Vertex AI is an emulator (a local stand-in)."""
        return is_emulator(self.vertex_endpoint)

    # -- the edge ---------------------------------------------------------------------------
    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Settings:
        """Read every setting from `environ` (the edge passes os.environ). Bad values: exit 2."""
        env = dict(environ)

        def text(name: str) -> str | None:
            value = env.get(name, "").strip()
            return value.rstrip("/") or None

        def endpoint(name: str) -> str | None:
            """An endpoint override: an http:// (a local stand-in) or https:// URL, else exit 2 (a
            bare host:port would be taken for Google's side and asked for credentials)."""
            value = text(name)
            if value is not None and not value.lower().startswith(("http://", "https://")):
                raise UserError(
                    f"${name}={env[name].strip()!r} is not a URL: an endpoint starts with http:// "
                    "(a local stand-in, no credentials) or https://",
                    hint=f"e.g. {name}=http://{value} for a stand-in on this machine",
                )
            return value

        gcloud = _gcloud_properties(env)
        retry = env.get(RETRY_ENV, "").strip()
        poll = env.get(POLL_ENV, "").strip()
        network = env.get(REPLICA_NETWORK_ENV, "").strip().lower() or "private"
        if network not in REPLICA_NETWORKS:
            raise UserError(
                f"${REPLICA_NETWORK_ENV}={env[REPLICA_NETWORK_ENV]!r} is not a replica network",
                hint=f"use one of: {', '.join(REPLICA_NETWORKS)} (docs/local.md)",
            )
        return cls(
            vertex_endpoint=endpoint(ENDPOINT_ENV),
            cloudbuild_endpoint=endpoint(CLOUDBUILD_ENV),
            registry_endpoint=endpoint(REGISTRY_ENV),
            logging_endpoint=endpoint(LOGGING_ENV),
            quotas_endpoint=endpoint(QUOTAS_ENV),
            billing_endpoint=endpoint(BILLING_ENV),
            billing_api_key=text(BILLING_KEY_ENV),
            serviceusage_endpoint=endpoint(SERVICEUSAGE_ENV),
            iam_endpoint=endpoint(IAM_ENV),
            monitoring_endpoint=endpoint(MONITORING_ENV),
            impersonate_service_account=(
                text(IMPERSONATE_ENV)
                or text("CLOUDSDK_AUTH_IMPERSONATE_SERVICE_ACCOUNT")
                or gcloud.get("auth", "impersonate_service_account", fallback=None)
                or None
            ),
            storage_emulator=text(STORAGE_EMULATOR_ENV),
            emulator_token=env.get(EMULATOR_TOKEN_ENV, "").strip() or None,
            replica_network=network,
            retry=RetryPolicy.parse(retry) if retry else RetryPolicy(),
            poll=PollPolicy.parse(poll) if poll else PollPolicy(),
            debug=env.get(DEBUG_ENV, "").strip() == "1",
            project=(
                text("GOOGLE_CLOUD_PROJECT")
                or text("CLOUDSDK_CORE_PROJECT")
                or gcloud.get("core", "project", fallback=None)
                or None
            ),
            region=text("CLOUDSDK_AI_REGION") or gcloud.get("ai", "region", fallback=None) or None,
            environ=env,
        )


def _gcloud_properties(env: Mapping[str, str]) -> configparser.ConfigParser:
    """gcloud's active configuration, read from its files (running gcloud costs ~0.7 s)."""
    cfg = configparser.ConfigParser()
    home = env.get("HOME")
    root_text = env.get("CLOUDSDK_CONFIG") or (str(Path(home) / ".config" / "gcloud") if home else "")
    if not root_text:
        return cfg
    root = Path(root_text)
    try:
        active = (root / "active_config").read_text().strip() or "default"
    except OSError:
        active = "default"
    try:
        cfg.read(root / "configurations" / f"config_{active}")
    except (OSError, configparser.Error, UnicodeDecodeError):
        pass
    return cfg
