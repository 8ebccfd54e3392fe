"""The service arm's keyword arguments (`arms.service.*`): an external retriever called over
HTTP (`retriever=service arms.service.url=URL`).

Only the schema and its checks live here (standard library imports only), so the config schema
loads without the HTTP client; `retrievers/service.py` is the arm that reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit

from retrieval_bench.errors import ConfigError

ON_ERROR = ("fail", "skip")


def _key(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


@dataclass
class ServiceConfig:
    url: str = ""
    """Where each query is POSTed as JSON {"query", "query_id", "top_k", "user_role"}."""
    results_path: str = "results"
    """Dotted paths into the response: the list of results ("" = the body is the list), and,
    inside each result, its passage id and its score ("" = the service gives no score: the
    service's order is kept and scored 1/rank)."""
    id_field: str = "id"
    """The field of each result that holds its passage id."""
    score_field: str = "score"
    """The field of each result that holds its score."""
    concurrency: int = 8
    """Requests in flight at once."""
    timeout_s: float = 30.0
    """Seconds each attempt may wait to connect, send and for each read of the answer."""
    retries: int = 2
    """Further attempts after a timeout, a connection error, a 429 or a 5xx (waiting
    retry_backoff_s, doubled each time); a malformed answer or another 4xx is not retried."""
    retry_backoff_s: float = 0.5
    """Seconds before the first retry, doubled for each further one."""
    on_error: str = field(default="fail", metadata={"choices": ON_ERROR})
    """fail: a query that still fails after its retries fails the job, naming it and the URL;
    skip: it gets an empty ranking (empty_reason `service_error`) and is counted."""

    def validate(self, prefix: str = "") -> None:
        """Ranges and the URL's form, each error naming its key (the bare field, which the arm's
        node prefixes: `arms.service.timeout_s`); the URL itself is required only by a job
        that runs the arm (`require_url`)."""
        if self.url:
            parts = urlsplit(self.url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ConfigError(
                    _key(prefix, "url"),
                    f"{self.url!r} is not an http(s) URL with a host, "
                    "e.g. http://127.0.0.1:8080/search",
                )
        if isinstance(self.concurrency, bool) or self.concurrency < 1:
            raise ConfigError(
                _key(prefix, "concurrency"), f"must be a positive integer, got {self.concurrency!r}"
            )
        if not self.timeout_s > 0:
            raise ConfigError(
                _key(prefix, "timeout_s"), f"must be > 0 seconds, got {self.timeout_s}"
            )
        if isinstance(self.retries, bool) or self.retries < 0:
            raise ConfigError(_key(prefix, "retries"), f"must be >= 0, got {self.retries!r}")
        if not self.retry_backoff_s >= 0:
            raise ConfigError(
                _key(prefix, "retry_backoff_s"), f"must be >= 0 seconds, got {self.retry_backoff_s}"
            )
        if self.on_error not in ON_ERROR:
            raise ConfigError(
                _key(prefix, "on_error"),
                f"{self.on_error!r} is not one of: {', '.join(ON_ERROR)}",
            )
        if not self.id_field:
            raise ConfigError(
                _key(prefix, "id_field"), "must name the field holding each result's id"
            )

    def require_url(self, prefix: str = "arms.service") -> None:
        """The arm cannot run without a URL: refused before any query is sent."""
        if not self.url:
            raise ConfigError(
                _key(prefix, "url"),
                "a service arm needs the service's URL, e.g. "
                f"{_key(prefix, 'url')}=http://127.0.0.1:8080/search",
            )
