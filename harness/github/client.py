"""PyGithub client construction and error translation.

Every call honours ``GITHUB_API_URL`` (GitHub Enterprise) and retries through ``GithubRetry``
(403 with Retry-After or a rate-limit body, and 5xx). Errors become one-line ``PublishError``s
that never include the token.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

from github import Auth, Github, GithubException, GithubRetry

from harness.errors import UserError

T = TypeVar("T")
DEFAULT_API = "https://api.github.com"


class PublishError(UserError):
    """A GitHub API call failed (after retries)."""


def api_url() -> str:
    return os.environ.get("GITHUB_API_URL") or DEFAULT_API


def make_github(token: str | None = None, base_url: str | None = None, retry: Any = None, timeout: float = 30.0,
                throttle: bool = True) -> Github:
    """``throttle`` keeps PyGithub's spacing of requests (0.25 s) and writes (1 s), GitHub's advice
    against secondary rate limits; tests against a loopback server turn it off (``BTI_GITHUB_THROTTLE=0``)."""
    token = token if token is not None else os.environ.get("GITHUB_TOKEN", "")
    if not token:
        raise PublishError("no GitHub token: set GITHUB_TOKEN (or pass --token-env NAME)")
    retry = retry if retry is not None else GithubRetry(total=5, backoff_factor=1.0)
    throttle = throttle and os.environ.get("BTI_GITHUB_THROTTLE", "1") != "0"
    spacing = {} if throttle else {"seconds_between_requests": 0.0, "seconds_between_writes": 0.0}
    return Github(auth=Auth.Token(token), base_url=(base_url or api_url()).rstrip("/"), retry=retry, timeout=int(timeout), **spacing)


def call(what: str, fn: Callable[[], T]) -> T:
    """Run one API interaction, turning GitHub/HTTP failures into a clear PublishError."""
    try:
        return fn()
    except PublishError:
        raise
    except GithubException as exc:
        message = exc.data.get("message") if isinstance(exc.data, dict) else None
        hint = {401: "the token is invalid or expired", 403: "the token lacks permission (or a rate limit outlasted the retries)",
                404: "check the repository name and that the token can see it", 422: "GitHub rejected the request body"}.get(exc.status)
        raise PublishError(f"GitHub API: {what} failed with {exc.status}{f' ({message})' if message else ''}", hint=hint) from None
    except Exception as exc:  # urllib3 MaxRetryError and friends after retries on 5xx or a dead host
        reason = getattr(exc, "reason", None) or exc
        raise PublishError(f"GitHub API: {what} failed: {type(exc).__name__}: {str(reason).splitlines()[0][:200]}") from None
