"""ApiClient: one HTTP exchange, one retry policy and one error parser for every Google REST API.

- Transient failures (connection errors, timeouts, HTTP 408/429/5xx, a 2xx that is not JSON) are
  retried with exponential backoff and full jitter, bounded in attempts and total time
  (`RetryPolicy`). One `Budget` can span several calls that serve one logical operation.
- Permanent failures become the project's errors: `ServiceError` (exit 3) with the service's
  status and message, and a hint from the caller's `hints` function (permissions, disabled API,
  wrong project), or `UserError` (exit 2) when credentials are missing.
- `send()` makes exactly one attempt (for creates whose outcome must be checked before trying
  again); `call()` and `json()` retry; `pages()` is the one pager of every list call.
- A caller's `final` hook names the refusals that carry a retryable status but are not worth
  retrying (a 429 that names an exhausted allocation quota, not a rate limit): they raise
  `Refused` (a ServiceError that keeps the `ApiError`) at once. `quota_metrics()` reads the quota
  metrics an error names.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from vertex_trainer.errors import ServiceError, UserError
from vertex_trainer.gcp import auth
from vertex_trainer.log import Log, silent
from vertex_trainer.settings import RetryPolicy, Settings

if TYPE_CHECKING:
    import requests

T = TypeVar("T")

TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})
MAX_PAGES = 100  # the bound on the pages one list call reads (ApiClient.pages)


class Transient(Exception):
    """A failure worth retrying (connection error, timeout, 408/429/5xx). `in_flight`: the
    request was sent and no answer came (a read timeout), so the service may still be working
    on it."""

    def __init__(self, message: str = "", *, in_flight: bool = False):
        super().__init__(message)
        self.in_flight = in_flight


def look_after_lost(
    lookup: Callable[[], Any],
    exc: Transient,
    *,
    window: float,
    sleep: Callable[[float], None] = time.sleep,
    first: float = 0.5,
) -> Any:
    """What a create whose answer was lost left behind: `lookup()` at once and, when the request
    may still be in flight (`exc.in_flight`), again with growing pauses for `window` seconds (the
    read timeout: a create the service is still committing lands within it), so it is found
    instead of sent a second time. Returns what `lookup` found last (None: nothing)."""
    found = lookup()
    deadline, pause = time.monotonic() + window, first
    while found is None and exc.in_flight and time.monotonic() < deadline:
        sleep(min(pause, max(0.0, deadline - time.monotonic())))
        pause *= 2
        found = lookup()
    return found


class Denied(ServiceError):
    """A 403 that names what the project lacks: an API not enabled, or a permission the caller
    does not hold. Still a ServiceError (callers that warn on one keep warning), but exit 2: it is
    the project's setup, not a service failure, and `vertex-trainer check` shows all of it at
    once (issue 33). `.api` or `.permission` names it."""

    exit_code = 2

    def __init__(
        self, message: str, *, api: str | None = None, permission: str | None = None, hint: str | None = None
    ):
        super().__init__(message, hint=hint)
        self.api, self.permission = api, permission


_DISABLED_API = re.compile(r"\b([a-z][a-z0-9-]*\.googleapis\.com)\b")
_DENIED_PERMISSION = re.compile(r"[Pp]ermission '?([a-z][a-zA-Z0-9]*(?:\.[a-zA-Z0-9]+){2,})'? denied")


def denial(err: ApiError) -> tuple[str | None, str | None]:
    """(api, permission) a 403 names: the API "has not been used ... or it is disabled"
    (SERVICE_DISABLED), or "Permission 'x.y.z' denied"; (None, None) for any other error."""
    if err.code != 403:
        return None, None
    text = err.message + " " + " ".join(str(d) for d in err.details)
    if "has not been used" in text or "SERVICE_DISABLED" in text or "is disabled" in text:
        m = _DISABLED_API.search(text)
        if m:
            return m[1], None
    m = _DENIED_PERMISSION.search(err.message)
    return (None, m[1]) if m else (None, None)


class Refused(ServiceError):
    """A permanent refusal the caller asked to tell apart (its `final` hook): `.error` is the
    service's ApiError. Exit 3 unless the caller handles it."""

    def __init__(self, message: str, *, error: ApiError, hint: str | None = None):
        super().__init__(message, hint=hint)
        self.error = error


@dataclass(frozen=True)
class ApiError:
    """A Google error body: `{"error": {"code", "status", "message", "details"}}` (or a bare text)."""

    code: int
    status: str
    message: str
    details: tuple[Any, ...] = ()

    def __str__(self) -> str:
        return f"HTTP {self.code} {self.status}: {self.message}".rstrip(": ")


def parse_error(response: requests.Response) -> ApiError:
    """The error of a non-2xx response, from any Google API's JSON error shape or plain text."""
    try:
        body = response.json()
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        message = error.get("message") or ""
        if not message and isinstance(error.get("errors"), list) and error["errors"]:
            message = str(error["errors"][0].get("message", ""))
        return ApiError(
            int(error.get("code") or response.status_code),
            str(error.get("status") or response.reason or ""),
            message,
            tuple(error.get("details") or ()),
        )
    if isinstance(body, dict) and isinstance(body.get("errors"), list) and body["errors"]:
        first = body["errors"][0]  # Docker registry API shape
        return ApiError(
            response.status_code,
            str(first.get("code") or response.reason or ""),
            str(first.get("message") or ""),
        )
    text = (response.text or "").strip().replace("\n", " ")
    return ApiError(response.status_code, response.reason or "", text[:300])


Hints = Callable[[str, ApiError], "str | None"]
_QUOTA_METRIC = re.compile(r"\b[a-z][a-z0-9-]*\.googleapis\.com/[a-z0-9_]+")


def quota_metrics(err: ApiError) -> tuple[str, ...]:
    """The quota metrics (`service.googleapis.com/metric`) an error names, in its message or in
    its details (google.rpc.ErrorInfo metadata, google.rpc.QuotaFailure violations)."""
    texts = [err.message]
    for detail in err.details:
        if isinstance(detail, dict):
            texts += [str(v) for v in (detail.get("metadata") or {}).values()]
            texts += [
                str(v.get("subject", "")) + " " + str(v.get("quotaMetric", ""))
                for v in detail.get("violations") or ()
                if isinstance(v, dict)
            ]
    found: list[str] = []
    for text in texts:
        found += [m for m in _QUOTA_METRIC.findall(text) if m not in found]
    return tuple(found)


def default_hint(service: str, api: str | None, project: str | None = None) -> Hints:
    """Hints every Google API shares: refused credentials, a disabled API."""
    where = f" --project {project}" if project else ""

    def hint(op: str, err: ApiError) -> str | None:
        if err.code == 401:
            return "the credentials were refused: run `gcloud auth application-default login` again"
        if (
            err.code == 403
            and api
            and (
                "has not been used" in err.message
                or "SERVICE_DISABLED" in err.message
                or "is disabled" in err.message
            )
        ):
            return f"enable the {service} API: gcloud services enable {api}{where}"
        return None

    return hint


class Budget:
    """One retry budget, shared by every call that serves one logical operation."""

    def __init__(
        self,
        policy: RetryPolicy,
        log: Log = silent,
        *,
        service: str = "the service",
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.policy, self.log, self.service, self._sleep = policy, log, service, sleep
        self.started = time.monotonic()
        self.failures = 0
        self._delay = policy.initial

    def backoff(self, what: str, failure: str, *, retry_hint: str | None = None) -> None:
        """Sleep before the next attempt, or raise ServiceError when the budget is spent."""
        self.failures += 1
        policy = self.policy
        delay = random.uniform(0, self._delay)  # full jitter
        self._delay = min(self._delay * policy.multiplier, policy.maximum)
        elapsed = time.monotonic() - self.started
        if self.failures >= policy.attempts or elapsed + delay > policy.deadline:
            raise ServiceError(
                f"{what} failed after {self.failures} attempt{'s' * (self.failures > 1)} "
                f"({elapsed:.1f}s): {failure}",
                hint=retry_hint
                or f"{self.service} is unreachable or overloaded; run the same command again later",
            )
        self.log(f"{what}: {failure}; retrying in {delay:.1f}s")
        self._sleep(delay)


class ApiClient:
    """One Google REST API at one endpoint: `ApiClient("https://x.googleapis.com", ...)`."""

    def __init__(
        self,
        endpoint: str,
        *,
        retry: RetryPolicy | None = None,
        log: Log | None = None,
        session: Any = None,
        service: str = "the API",
        hints: Hints | None = None,
        retry_hint: str | None = None,
        user_error: Callable[[str, ApiError], bool] | None = None,
        final: Callable[[str, ApiError], bool] | None = None,
        token: str | None = None,
    ):
        self.endpoint = endpoint.rstrip("/")
        # A sandbox's token (Settings.emulator_token): sent to an emulator (http://) endpoint
        # only, as Google's clients send their credential (gcp/auth.py).
        self.token = token
        self.retry = retry or RetryPolicy()
        self.log = log if log is not None else silent
        self.service = service
        self.hints = hints
        self.retry_hint = retry_hint
        # Refusals that are the caller's input (e.g. a job id that does not exist): exit 2.
        self.user_error = user_error
        # Refusals with a retryable status that are final all the same: Refused, no retry.
        self.final = final
        self._session = session

    @classmethod
    def of(
        cls, settings: Settings, endpoint: str, *, retry: RetryPolicy | None = None, **kwargs: Any
    ) -> ApiClient:
        """A client of `endpoint` with what `settings` gives every client: its retry policy (unless
        `retry`) and a sandbox's token (`emulator_token`, sent to emulator endpoints only).
        `kwargs`: the constructor's other arguments."""
        return cls(endpoint, retry=retry or settings.retry, token=settings.emulator_token, **kwargs)

    @property
    def emulator(self) -> bool:
        return auth.is_emulator(self.endpoint)

    @property
    def session(self) -> Any:  # a requests.Session, or what the caller passed in
        if self._session is None:
            self._session = auth.session(self.endpoint)
        return self._session

    def url(self, path: str) -> str:
        """An absolute URL from a path under the endpoint ("v1/projects/...") or a full URL."""
        if path.startswith(("http://", "https://")):
            return path
        return f"{self.endpoint}/{path.lstrip('/')}"

    def budget(self) -> Budget:
        return Budget(self.retry, self.log, service=self.service)

    # -- one exchange -------------------------------------------------------------------------
    def send(
        self, op: str, method: str, path: str, *, allow: Iterable[int] = (), **kwargs: Any
    ) -> requests.Response:
        """One attempt. Returns the response (2xx, or a status in `allow`); raises Transient, or
        ServiceError/UserError for a permanent failure."""
        import requests  # ~0.1 s: loaded by the first request (plan_artifact and --help stay without)

        kwargs.setdefault("timeout", (self.retry.connect_timeout, self.retry.read_timeout))
        if self.token and self.emulator:
            kwargs["headers"] = {**auth.emulator_headers(self.token), **(kwargs.get("headers") or {})}
        try:
            response: requests.Response = self.session.request(method, self.url(path), **kwargs)
        except requests.Timeout as exc:  # a read timeout: sent, unanswered, maybe still running
            raise Transient(
                f"timed out ({type(exc).__name__})", in_flight=isinstance(exc, requests.ReadTimeout)
            ) from exc
        except requests.ConnectionError as exc:
            raise Transient(f"connection failed: {_short(exc)}") from exc
        except UserError:
            raise
        except Exception as exc:  # google-auth refresh problems surface here
            _raise_auth(exc)
            raise
        if response.status_code < 400 or response.status_code in set(allow):
            return response
        err = parse_error(response)
        if response.status_code in TRANSIENT_STATUS and not (self.final and self.final(op, err)):
            raise Transient(str(err))
        raise self.error(op, path, err)

    def error(self, op: str, path: str, err: ApiError) -> ServiceError | UserError:
        """The project's error for a permanent failure of `op`: UserError (exit 2) when the
        caller's `user_error` says the input was wrong, else ServiceError (exit 3)."""
        hint = self.hints(op, err) if self.hints else None
        resource = re.sub(r"^v\d+\w*/", "", path)  # v1/projects/... -> projects/...
        if self.final and self.final(op, err):
            return Refused(f"{op} {resource}: {err}", error=err, hint=hint)
        if self.user_error and self.user_error(op, err):
            return UserError(f"{op} {resource}: {err}", hint=hint)
        api, permission = denial(err)
        if api or permission:
            what = (
                f"the {api} API is not enabled in the project" if api else f"permission {permission} denied"
            )
            return Denied(
                f"{op} {resource}: {what} (HTTP 403 {err.status}); `vertex-trainer check` shows "
                "what else the job needs",
                api=api,
                permission=permission,
                hint=hint,
            )
        return ServiceError(f"{op} {resource}: {err}", hint=hint)

    # -- with retries -------------------------------------------------------------------------
    def call(
        self, op: str, method: str, path: str, *, budget: Budget | None = None, **kwargs: Any
    ) -> requests.Response:
        """`send` with retries of transient failures; returns the response."""
        return self._retried(op, budget, lambda: self.send(op, method, path, **kwargs))

    def json(
        self, op: str, method: str, path: str, *, budget: Budget | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """`call` and decode the JSON answer (a 2xx that is not JSON counts as transient)."""
        return self._retried(op, budget, lambda: decode(self.send(op, method, path, **kwargs)))

    # -- lists --------------------------------------------------------------------------------
    def pages(
        self,
        op: str,
        method: str,
        path: str,
        *,
        items: str,
        params: dict[str, Any] | None = None,
        body: dict[str, Any] | None = None,
        page_size: int = 100,
        max_pages: int | None = MAX_PAGES,
        limit: int | None = None,
        budget: Budget | None = None,
        read: Callable[[Callable[[], dict[str, Any]]], dict[str, Any]] | None = None,
    ) -> Iterator[list[dict[str, Any]]]:
        """The one pager of every Google list call (AIP-158: pageSize, pageToken, nextPageToken).

        Args:
            op, method, path: as for `json` (GET sends the page fields as query parameters,
                POST in the JSON `body`, as Cloud Logging's entries:list wants).
            items: the answer's field that holds the page's resources ("customJobs").
            params, body: the list call's own query parameters or body (filter, orderBy).
            page_size: pageSize of every request.
            max_pages: a bound on the pages read (None: no bound); when it stops a list that
                goes on, `log` says so.
            limit: stop once this many items have been yielded (the last page is not cut).
            budget: one retry budget for every page.
            read: wraps each request (`read(fetch) -> page`), e.g. to pace reads under a quota.

        Yields: each page's items (a list, possibly empty), in the service's order."""
        token, count, pages = "", 0, 0
        while max_pages is None or pages < max_pages:
            paging: dict[str, Any] = {"pageSize": page_size, **({"pageToken": token} if token else {})}
            kwargs = (
                {"json": {**(body or {}), **paging}}
                if method == "POST"
                else {"params": {**(params or {}), **paging}}
            )

            def fetch(kwargs: dict[str, Any] = kwargs) -> dict[str, Any]:
                return self.json(op, method, path, budget=budget, **kwargs)

            page = read(fetch) if read else fetch()
            pages += 1
            found = page.get(items) or []
            count += len(found)
            yield found
            token = page.get("nextPageToken") or ""
            if not token or (limit is not None and count >= limit):
                return
        self.log(f"{op}: stopped after {max_pages} pages; the list goes on (narrow the filter)")

    def list(
        self, op: str, path: str, *, items: str, limit: int | None = None, **kwargs: Any
    ) -> list[dict[str, Any]]:
        """Every item of a GET list call, through `pages` (same arguments), at most `limit`.

        Returns: the items in the service's order."""
        found = [
            item for page in self.pages(op, "GET", path, items=items, limit=limit, **kwargs) for item in page
        ]
        return found[:limit] if limit is not None else found

    def _retried(self, op: str, budget: Budget | None, attempt: Callable[[], T]) -> T:
        budget = budget or self.budget()
        while True:
            try:
                return attempt()
            except Transient as exc:
                budget.backoff(op, str(exc), retry_hint=self.retry_hint)


class ProjectApi:
    """A Google API read for one project: `api`, its ApiClient, with the hints every Google API
    shares (default_hint), then the API's own (`hint`). A subclass names the API (`SERVICE`, its
    host `HOST`) and its endpoint (`endpoint`)."""

    SERVICE = ""  # in messages, e.g. "Cloud Quotas"
    HOST = ""  # the API to enable, e.g. cloudquotas.googleapis.com

    def __init__(
        self,
        project: str,
        *,
        settings: Settings,
        retry: RetryPolicy | None = None,
        log: Log | None = None,
        session: Any = None,
    ):
        self.project = project
        shared = default_hint(self.SERVICE, self.HOST, project)
        self.api = ApiClient.of(
            settings,
            self.endpoint(settings),
            retry=retry,
            log=log,
            session=session,
            service=self.SERVICE,
            hints=lambda op, err: shared(op, err) or self.hint(err),
        )

    def endpoint(self, settings: Settings) -> str:
        """The API's endpoint in `settings` (a stand-in's, or Google's)."""
        raise NotImplementedError

    def hint(self, err: ApiError) -> str | None:
        """The API's own hint for a refusal (after the shared ones), or None."""
        return None


def decode(response: requests.Response) -> dict[str, Any]:
    """The JSON body of a 2xx response ({} when empty); Transient when it is not JSON."""
    if not response.content:
        return {}
    try:
        body = response.json()
    except ValueError:
        raise Transient(f"HTTP {response.status_code} with a body that is not JSON") from None
    return body if isinstance(body, dict) else {"value": body}


def _raise_auth(exc: Exception) -> None:
    """Turn google-auth refresh failures into a clear message; nothing reached the API."""
    try:
        from google.auth import exceptions as auth_exceptions
    except ImportError:  # pragma: no cover
        return
    if isinstance(exc, auth_exceptions.RefreshError):
        raise UserError(
            f"could not get an access token: {exc}",
            hint="run `gcloud auth application-default login` again (the stored "
            "credentials expired or were revoked)",
        ) from exc
    if isinstance(exc, auth_exceptions.TransportError):
        raise Transient(f"could not reach the token endpoint: {exc}") from exc


def _short(exc: Exception) -> str:
    text = str(exc)
    m = re.search(
        r"\[Errno -?\d+\] [^'\")]+|Connection refused|RemoteDisconnected\([^)]*\)|"
        r"Connection reset by peer|Connection aborted",
        text,
    )
    return m.group(0) if m else text[:200]
