"""PyGithub client construction, retries and error translation.

Every call honours ``GITHUB_API_URL`` (GitHub Enterprise). Reads retry through ``GithubRetry`` (5xx, and
403/429 rate limits). Writes never retry inside urllib3: a POST that GitHub stored but answered with a 502
would be sent twice. ``write`` retries them itself, asking ``recheck`` first whether the first attempt
landed after all (the sticky comment is listed again before a create is repeated). No wait is longer
than ``BTI_GITHUB_MAX_WAIT`` seconds (default 60): an exhausted rate limit that resets later fails at
once, naming the reset time. Errors become one-line ``PublishError``s that never include the token.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

from github import Auth, Github, GithubException, GithubRetry
from github.GithubException import RateLimitExceededExceedsMaxWait

from harness.errors import UserError
from harness.settings import current

T = TypeVar("T")


class PublishError(UserError):
    """A GitHub API call failed (after retries); ``status`` is GitHub's HTTP status when there was one."""

    def __init__(self, message: str, hint: str | None = None, status: int | None = None) -> None:
        super().__init__(message, hint)
        self.status = status


def api_url() -> str:
    return current().github_api_url


def max_wait() -> float:
    """The longest bti sleeps for GitHub (a rate limit, a Retry-After): ``BTI_GITHUB_MAX_WAIT``, default 60 s."""
    return current().github_max_wait_s


def read_retry(total: int = 5, backoff_factor: float | None = None) -> GithubRetry:
    """Retries for idempotent reads only; writes go through ``write``. The backoff is the settings'
    (``BTI_GITHUB_BACKOFF``, 1 s by default), as for writes."""
    backoff_factor = current().github_backoff_s if backoff_factor is None else backoff_factor
    wait = max_wait()
    return GithubRetry(total=total, backoff_factor=backoff_factor, allowed_methods={"GET", "HEAD"},
                       max_rate_limit_wait=wait, secondary_rate_wait=min(60.0, wait))


def make_github(token: str | None = None, base_url: str | None = None, retry: Any = None, timeout: float = 30.0,
                throttle: bool = True) -> Github:
    """``throttle`` keeps PyGithub's spacing of requests (0.25 s) and writes (1 s), GitHub's advice
    against secondary rate limits; tests against a loopback server turn it off (``BTI_GITHUB_THROTTLE=0``)."""
    token = token if token is not None else os.environ.get("GITHUB_TOKEN", "")
    if not token:
        raise PublishError("no GitHub token: set GITHUB_TOKEN (or pass --token-env NAME)")
    retry = retry if retry is not None else read_retry()
    throttle = throttle and current().github_throttle
    spacing: dict[str, Any] = {} if throttle else {"seconds_between_requests": 0.0, "seconds_between_writes": 0.0}
    return Github(auth=Auth.Token(token), base_url=(base_url or api_url()).rstrip("/"), retry=retry, timeout=int(timeout),
                  per_page=100, **spacing)


def _reset_text(headers: dict[str, str] | None) -> str:
    reset = {k.lower(): v for k, v in (headers or {}).items()}.get("x-ratelimit-reset", "")
    if not reset.isdigit():
        return "later"
    when = datetime.fromtimestamp(int(reset), UTC)
    return f"at {when:%H:%M:%S} UTC (in {max(0, int(int(reset) - time.time()))} s)"


def graphql_errors(data: Any) -> tuple[str, set[str]] | None:
    """GitHub's own words from a GraphQL answer that carried ``errors`` (PyGithub raises it as a 400 with no
    ``message``): the first three, one line, and their ``type``s (``RATE_LIMITED``, ``TIMEOUT``…). None otherwise."""
    errors = data.get("errors") if isinstance(data, dict) else None
    if not isinstance(errors, list) or not errors:
        return None
    parts, types = [], set()
    for err in errors[:3]:
        if not isinstance(err, dict):
            continue
        kind = str(err.get("type") or "")
        types.add(kind)
        text = " ".join(str(err.get("message") or "").split())  # GitHub's text, kept to one plain line
        parts.append(f"{kind}: {text}" if kind else text)
    return "; ".join(p for p in parts if p)[:400] or "errors without a message", types


def _retry_after(exc: GithubException, attempt: int) -> float | None:
    """Seconds to wait before repeating a failed write, or None when repeating cannot help."""
    headers = {k.lower(): v for k, v in (exc.headers or {}).items()}
    gql = graphql_errors(exc.data)
    if gql is not None:  # a GraphQL answer with errors: a rate limit waits for its reset, a timeout a little
        if "RATE_LIMITED" in gql[1]:
            if headers.get("x-ratelimit-reset", "").isdigit():
                return max(0.0, int(headers["x-ratelimit-reset"]) - time.time() + 1)
            return 60.0
        return 5.0 * attempt if "TIMEOUT" in gql[1] or "timeout" in gql[0].lower() else None
    message = str(exc.data.get("message", "") if isinstance(exc.data, dict) else exc.data).lower()
    if exc.status >= 500:
        return float(current().github_backoff_s * 2 ** (attempt - 1))
    if exc.status not in (403, 429):
        return None
    if headers.get("retry-after", "").isdigit():
        return float(headers["retry-after"])
    if headers.get("x-ratelimit-remaining") == "0" and headers.get("x-ratelimit-reset", "").isdigit():
        return max(0.0, int(headers["x-ratelimit-reset"]) - time.time() + 1)
    if "rate limit" in message:
        return 60.0
    return None


def write(what: str, fn: Callable[[], T], *, recheck: Callable[[], T | None] | None = None, attempts: int = 4,
          repeat_5xx: bool = True) -> T:
    """One write, repeated on 5xx and rate limits. Before a repeat, ``recheck`` may find that the first
    attempt landed (its result is returned then). ``repeat_5xx=False`` for writes that must never happen
    twice and cannot be checked (a dispatch): a 5xx then fails, since GitHub may have acted already."""
    limit = max_wait()
    for attempt in range(1, attempts + 1):
        try:
            return call(what, fn, raw=True)
        except GithubException as exc:
            wait = _retry_after(exc, attempt)
            if exc.status >= 500 and not repeat_5xx:
                raise PublishError(f"GitHub API: {what} failed with {exc.status}; not repeated, because GitHub may have "
                                   "acted on it already and a second request would act twice") from None
            if wait is None or attempt == attempts:
                call(what, functools.partial(_raise, exc))
            gql = graphql_errors(exc.data)
            if wait is not None and wait > limit and gql is not None:
                raise PublishError(f"GitHub API: {what}: GitHub answered with errors: {gql[0]}; it resets "
                                   f"{_reset_text(exc.headers)}; bti waits at most {limit:g} s (BTI_GITHUB_MAX_WAIT)") from None
            if wait is not None and wait > limit and exc.status in (403, 429):
                raise PublishError(f"GitHub API: {what}: rate limit exhausted, it resets {_reset_text(exc.headers)}; "
                                   f"bti waits at most {limit:g} s (BTI_GITHUB_MAX_WAIT)") from None
            time.sleep(min(wait or 0.0, limit) if exc.status >= 500 else (wait or 0.0))
        if recheck is not None:
            found = call(f"{what} (checking whether it landed)", recheck)
            if found is not None:
                return found
    raise AssertionError("unreachable")


def _raise(exc: BaseException) -> Any:
    raise exc


def call(what: str, fn: Callable[[], T], raw: bool = False) -> T:
    """Run one API interaction, turning GitHub/HTTP failures into a clear PublishError
    (``raw``: let a ``GithubException`` through, for ``write`` to decide on a retry)."""
    try:
        return fn()
    except PublishError:
        raise
    except RateLimitExceededExceedsMaxWait as exc:
        raise PublishError(f"GitHub API: {what}: rate limit exhausted, it resets {_reset_text(exc.headers)}; "
                           f"bti waits at most {max_wait():g} s (BTI_GITHUB_MAX_WAIT)") from None
    except GithubException as exc:
        if raw:
            raise
        gql = graphql_errors(exc.data)
        if gql is not None:  # GitHub answered, with errors: say what it said, and when to try again
            text, types = gql
            when = (f"retry {_reset_text(exc.headers)}" if "RATE_LIMITED" in types
                    else "retry in a minute" if "TIMEOUT" in types or "timeout" in text.lower() else "")
            raise PublishError(f"GitHub API: {what}: GitHub answered with errors: {text}" + (f"; {when}" if when else ""),
                               status=exc.status) from None
        message = exc.data.get("message") if isinstance(exc.data, dict) else None
        hint = {401: "the token is invalid or expired", 403: "the token lacks permission (or a rate limit outlasted the retries)",
                404: "check the repository name and that the token can see it", 422: "GitHub rejected the request body"}.get(exc.status)
        raise PublishError(f"GitHub API: {what} failed with {exc.status}{f' ({message})' if message else ''}", hint=hint,
                           status=exc.status) from None
    except Exception as exc:  # urllib3 MaxRetryError and friends after retries on 5xx or a dead host
        reason = getattr(exc, "reason", None) or exc
        raise PublishError(f"GitHub API: {what} failed: {type(exc).__name__}: {str(reason).splitlines()[0][:200]}") from None
