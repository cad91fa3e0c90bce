"""Shared HTTP plumbing for the API clients: process-wide rate limits, retries with back-off, clear failures."""

from __future__ import annotations

import email.utils
import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import metadata
from typing import Any, TypeVar
from urllib.parse import urlsplit

import requests
from urllib3.exceptions import NewConnectionError

log = logging.getLogger(__name__)

T = TypeVar("T")

# Request parameters whose values are secrets (or personal data) and never appear in logs or messages.
SECRET_PARAMS = ("api_key", "email", "mailto")
# Spacing margin of the rate limiter: requests leave at least (1 + RATE_SAFETY) / qps seconds apart, so
# network jitter cannot squeeze qps + 1 requests into one second as the server counts them.
RATE_SAFETY = 0.10
# Default cap on a server's Retry-After ([ingest] retry_after_cap_s): a longer one waits the cap, then retries.
RETRY_AFTER_CAP_S = 120.0
RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
# After a host could not be resolved or refused the connection, the client answers ApiUnreachable without asking
# for this long: a machine without network goes offline at once instead of retrying every request.
UNREACHABLE_HOLD_S = 300.0

_SECRET_RE = re.compile(r"(?i)\b(" + "|".join(SECRET_PARAMS) + r")=[^&\s'\"]*")
_MAILTO_RE = re.compile(r"(?i)mailto:[^\s;)]+")


class ApiError(RuntimeError):
    """An external API did not give a usable answer; `api` names it ("eutils", "crossref")."""

    def __init__(self, api: str, message: str, *, status: int | None = None, body: str = ""):
        super().__init__(f"{api}: {message}")
        self.api = api
        self.status = status
        self.body = body


class ApiUnavailable(ApiError):
    """The API stayed unreachable or broken through every retry; the tool layer reports `api_offline`."""

    def __init__(self, api: str, message: str, *, attempts: int, last_error: str, status: int | None = None):
        super().__init__(api, message, status=status)
        self.attempts = attempts
        self.last_error = last_error

    def to_tool_result(self) -> dict[str, Any]:
        """The tools' answer to a call whose API failed after the final retry."""
        return {"api_offline": True, "api": self.api, "error": str(self)}


class ApiUnreachable(ApiUnavailable):
    """The host could not be resolved or refused the connection: no retry, and this client stays offline for
    `UNREACHABLE_HOLD_S` (one notice in the log; callers log the consequence at INFO, not as an error)."""


class ApiRequestError(ApiError):
    """The service answered that this request is wrong (4xx other than 429, or an error document): not retried."""


class ApiNotFound(ApiRequestError):
    """HTTP 404: the requested resource does not exist."""


class BadResponse(Exception):
    """A body that cannot be used (truncated, undecodable, wrong content type): retried like a 5xx."""


def redact(text: str) -> str:
    """`text` with secret query parameters and mailto addresses masked."""
    return _MAILTO_RE.sub("mailto:***", _SECRET_RE.sub(lambda m: f"{m.group(1)}=***", text))


def unreachable(exc: BaseException) -> bool:
    """True for a failure to resolve the host or to open a connection (refused, no route): nothing to retry.

    Timeouts (the host is there but slow), dropped connections and HTTP errors are transient and retried.
    """
    if not isinstance(exc, requests.ConnectionError) or isinstance(exc, requests.Timeout):
        return False
    seen: set[int] = set()
    todo: list[object] = [exc]
    while todo:
        cur = todo.pop()
        if id(cur) in seen or cur is None:
            continue
        seen.add(id(cur))
        if isinstance(cur, NewConnectionError):  # NameResolutionError is one (urllib3 2)
            return True
        if isinstance(cur, BaseException):
            todo.extend([*cur.args, getattr(cur, "reason", None), cur.__cause__, cur.__context__])
    return False


def failure_level(exc: BaseException) -> int:
    """The log level for a caller's own line about a failed call: INFO after an unreachable host (the client has
    said so once, as a warning), ERROR otherwise."""
    return logging.INFO if isinstance(exc, ApiUnreachable) else logging.ERROR


def describe_error(exc: BaseException) -> str:
    """A one-line, secret-free description of a failed attempt."""
    return redact(f"{type(exc).__name__}: {exc}")[:300]


def user_agent(contact: str | None = None) -> str:
    """The User-Agent every ra request carries (Crossref's polite pool wants a mailto in it)."""
    try:
        version = metadata.version("ra")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
        version = "0"
    who = f"; mailto:{contact}" if contact else ""
    return f"ra/{version} (literature-discovery agent{who})"


class RateLimiter:
    """At most `qps` requests per second across all threads: each caller reserves the next free slot."""

    def __init__(self, qps: float, safety: float = RATE_SAFETY):
        if qps <= 0:
            raise ValueError("qps must be positive")
        self.qps = qps
        self.interval = (1.0 + safety) / qps
        self._lock = threading.Lock()
        self._next = 0.0

    def acquire(self) -> float:
        """Block until this caller may send; returns the seconds waited."""
        with self._lock:
            now = time.monotonic()
            slot = max(now, self._next)
            self._next = slot + self.interval
        wait = slot - now
        if wait > 0:
            time.sleep(wait)
        return wait


_LIMITERS: dict[tuple[str, str, float], RateLimiter] = {}
_LIMITERS_LOCK = threading.Lock()


def shared_limiter(api: str, base_url: str, qps: float) -> RateLimiter:
    """One limiter per (API, host, rate) in this process, shared by every client instance and thread."""
    parts = urlsplit(base_url)
    key = (api, f"{parts.scheme}://{parts.netloc}", float(qps))
    with _LIMITERS_LOCK:
        limiter = _LIMITERS.get(key)
        if limiter is None:
            limiter = _LIMITERS[key] = RateLimiter(qps)
        return limiter


@dataclass(frozen=True)
class RetryPolicy:
    """`retries` extra attempts after the first; wait `fixed_wait_s` or `backoff_factor ** n` before retry n."""

    retries: int
    backoff_factor: float
    fixed_wait_s: float | None = None
    retry_after_cap_s: float = RETRY_AFTER_CAP_S

    def wait(self, retry_number: int) -> float:
        if self.fixed_wait_s is not None:
            return self.fixed_wait_s
        return self.backoff_factor**retry_number


def retry_after_seconds(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date); None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class HttpClient:
    """GET/POST with a shared rate limit, retries with back-off and a parse step that may reject the body.

    `on_result(ok, error)` is told once per logical request: ok after a usable answer,
    not ok after the final failed attempt (the API-health counter of offline mode).
    """

    def __init__(
        self,
        api: str,
        *,
        limiter: RateLimiter,
        policy: RetryPolicy,
        timeout_s: float,
        headers: Mapping[str, str],
        on_result: Callable[[bool, str], None] | None = None,
    ):
        self.api = api
        self.limiter = limiter
        self.policy = policy
        self.timeout_s = timeout_s
        self.headers = dict(headers)
        self.on_result = on_result
        self._local = threading.local()
        self._unreachable: tuple[float, str] | None = None  # (monotonic time, reason) of the last unreachable host

    def _session(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = requests.Session()
            session.headers.update(self.headers)
            self._local.session = session
        return session

    def close(self) -> None:
        session = getattr(self._local, "session", None)
        if session is not None:
            session.close()
            self._local.session = None

    def request(
        self,
        method: str,
        url: str,
        parse: Callable[[requests.Response], T],
        *,
        params: Mapping[str, Any] | None = None,
        data: Mapping[str, Any] | None = None,
        retries: int | None = None,
    ) -> T:
        """Send, retrying transient failures; returns `parse(response)` of the first usable answer.

        Retried: connection errors, timeouts, broken or short bodies, 408/425/429/5xx, and
        `BadResponse` raised by `parse`. Not retried: other 4xx (`ApiRequestError`,
        `ApiNotFound`) and `ApiRequestError` raised by `parse`. After the last attempt:
        `ApiUnavailable`.
        """
        retries = self.policy.retries if retries is None else retries
        attempts = retries + 1
        path = urlsplit(url).path
        if self._unreachable and self.offline:
            reason = self._unreachable[1]
            raise ApiUnreachable(self.api, f"{method} {path} not sent: offline ({reason})", attempts=0,
                                 last_error=reason)  # fmt: skip
        last_error, last_status = "", None
        for attempt in range(1, attempts + 1):
            self.limiter.acquire()
            retry_after = None
            try:
                resp = self._session().request(method, url, params=params, data=data, timeout=self.timeout_s)
                last_status = resp.status_code
                if resp.status_code in RETRY_STATUSES or resp.status_code >= 500:
                    retry_after = retry_after_seconds(resp.headers.get("Retry-After"))
                    raise BadResponse(f"HTTP {resp.status_code} {_snippet(resp)}")
                if resp.status_code == 404:
                    raise ApiNotFound(self.api, f"HTTP 404 for {path}", status=404, body=_snippet(resp, 500))
                if resp.status_code >= 400:
                    raise ApiRequestError(
                        self.api, f"HTTP {resp.status_code} for {path}: {_snippet(resp)}",
                        status=resp.status_code, body=_snippet(resp, 2000),
                    )  # fmt: skip
                result = parse(resp)
            except ApiRequestError:
                raise
            except (requests.RequestException, BadResponse) as exc:
                last_error = describe_error(exc)
                if unreachable(exc):
                    raise self._went_offline(method, url, last_error) from None
            else:
                if self.on_result:
                    self.on_result(True, "")
                return result
            if attempt < attempts:
                wait = self.policy.wait(attempt)
                if retry_after is not None:
                    cap = self.policy.retry_after_cap_s
                    if retry_after > cap:
                        log.warning("%s: Retry-After %.0fs is above the %.0fs cap ([ingest] retry_after_cap_s); "
                                    "waiting the cap", self.api, retry_after, cap)  # fmt: skip
                    wait = max(wait, min(retry_after, cap))
                log.warning(
                    "%s: %s %s failed (attempt %d/%d): %s; retrying in %.2fs",
                    self.api, method, path, attempt, attempts, last_error, wait,
                )  # fmt: skip
                time.sleep(wait)
        message = f"{method} {path} failed after {attempts} attempt(s): {last_error}"
        log.error("%s: %s", self.api, message)
        if self.on_result:
            self.on_result(False, message)
        raise ApiUnavailable(self.api, message, attempts=attempts, last_error=last_error, status=last_status)

    @property
    def offline(self) -> bool:
        """True while this client holds its host for unreachable (requests fail at once, nothing is sent)."""
        held = self._unreachable
        return held is not None and time.monotonic() - held[0] < UNREACHABLE_HOLD_S

    def _went_offline(self, method: str, url: str, error: str) -> ApiUnreachable:
        """The one notice of an unreachable host; later requests of this client fail at once (`UNREACHABLE_HOLD_S`)."""
        host = urlsplit(url).netloc
        cause = ("name not resolved" if "NameResolution" in error else
                 "connection refused" if "refused" in error else "no connection")  # fmt: skip
        self._unreachable = (time.monotonic(), f"{host} unreachable: {cause}")
        log.warning("%s: %s cannot be reached (%s): going on offline from the local corpus; results are "
                    "provisional: offline", self.api, host, cause)  # fmt: skip
        if self.on_result:
            self.on_result(False, f"{host} unreachable: {cause}")
        path = urlsplit(url).path
        return ApiUnreachable(self.api, f"{method} {path}: {host} unreachable ({cause}); offline",
                              attempts=1, last_error=error)  # fmt: skip


def _snippet(resp: requests.Response, limit: int = 120) -> str:
    """The start of a response body as text, for messages (secrets redacted)."""
    try:
        text = resp.content[:limit].decode("utf-8", errors="replace")
    except requests.RequestException:
        return ""
    return redact(" ".join(text.split()))


def require_content_type(resp: requests.Response, *wanted: str) -> None:
    """Raise BadResponse when the body is declared as something else (an HTML error page, typically)."""
    declared = resp.headers.get("Content-Type", "").lower()
    if declared and not any(w in declared for w in wanted):
        raise BadResponse(f"unexpected content type {declared!r}: {_snippet(resp)}")


__all__ = [
    "ApiError",
    "ApiNotFound",
    "ApiRequestError",
    "ApiUnavailable",
    "ApiUnreachable",
    "BadResponse",
    "HttpClient",
    "RateLimiter",
    "RetryPolicy",
    "describe_error",
    "failure_level",
    "redact",
    "require_content_type",
    "retry_after_seconds",
    "shared_limiter",
    "unreachable",
    "user_agent",
]
