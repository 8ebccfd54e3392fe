"""The chat-model judge (`--judge openai`): each pair is one request to an OpenAI-compatible
chat-completions endpoint (vLLM, Ollama, llama.cpp's server, a hosted API: whatever serves
`POST .../chat/completions`), with the UMBRELA prompt (`judge.prompt`) as the user message.

The request is `{"model", "messages": [{"role": "user", "content": <prompt>}], "temperature":
0, "max_tokens"}`; the grade is read from `choices[0].message.content` (`prompt.parse_grade`).
An `Authorization: Bearer` header is sent when the environment variable `--api-key-env` names
one that is set (the key is never written anywhere). Requests go through the service arm's HTTP
machinery (`http_json`): `concurrency` in flight, a timeout per attempt, and retries of
timeouts, connection errors, 429 and 5xx answers, and of answers that are not a grade (a model
may answer differently when asked again); a pair still without a grade after its retries is
unjudged, with the last attempt's reason. A malformed answer (not JSON, no message) or another
4xx is not retried: the endpoint would answer the same.

When the answer reports `usage` (prompt and completion tokens), the judgment records it as the
call's `cost`, in US dollars too when the prices per million tokens are given.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from retrieval_bench.errors import ConfigError
from retrieval_bench.http_json import AttemptFailed, Connections, post_json, with_retries
from retrieval_bench.judge.base import Done, Key, Pair, Verdict, cli_key
from retrieval_bench.judge.prompt import NotAGrade, Prompt, language_of, parse_grade
from retrieval_bench.progress import progress

CHAT_PATH = "/chat/completions"


@dataclass(frozen=True)
class ChatSettings:
    """The endpoint and how to call it (the command's flags of the same names)."""

    url: str
    model: str
    concurrency: int = 8
    timeout_s: float = 60.0
    retries: int = 2
    retry_backoff_s: float = 0.5
    max_tokens: int = 100
    api_key_env: str = "OPENAI_API_KEY"
    usd_per_mtok_in: float | None = None
    usd_per_mtok_out: float | None = None

    def validate(self, key: Key = cli_key) -> None:
        """The first bad setting is a ConfigError naming it (`key`: flag or config key)."""
        if not self.model.strip():
            raise ConfigError(key("model"), "the chat judge needs the model's name")
        for name, value, low in (
            ("concurrency", self.concurrency, 1),
            ("max_tokens", self.max_tokens, 1),
            ("retries", self.retries, 0),
        ):
            if value < low:
                raise ConfigError(key(name), f"must be at least {low}, got {value}")
        if not self.timeout_s > 0:
            raise ConfigError(key("timeout_s"), f"must be positive, got {self.timeout_s}")
        if self.retry_backoff_s < 0:
            raise ConfigError(
                key("retry_backoff_s"), f"must be 0 or more, got {self.retry_backoff_s}"
            )
        chat_url(self.url, key("url"))


def chat_url(url: str, flag: str = "--url") -> str:
    """The chat-completions URL of `url`: the API's base (`http://127.0.0.1:8000/v1`) gets
    `/chat/completions` appended; a URL already ending so is kept. Anything but an http(s)
    URL with a host exits 2 naming --url."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            flag,
            f"{url!r} is not an http(s) URL with a host (e.g. http://127.0.0.1:8000/v1, an "
            "OpenAI-compatible API's base)",
        )
    try:
        parts.port  # noqa: B018  (a malformed port raises here)
    except ValueError as exc:
        raise ConfigError(flag, f"{url!r}: {exc}") from None
    path = parts.path.rstrip("/")
    if not path.endswith(CHAT_PATH):
        path += CHAT_PATH
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


class ChatJudge:
    """A `judge.base.Judge` over a chat-completions endpoint (module docstring)."""

    kind = "openai"

    def __init__(
        self,
        settings: ChatSettings,
        prompts: Mapping[str, Prompt],
        to_scale: Callable[[int], int],
        key: Key = cli_key,
    ) -> None:
        settings.validate(key)
        self._to_scale = to_scale
        self.settings = settings
        self.model = settings.model
        self.url = chat_url(settings.url, key("url"))
        self.prompts = dict(prompts)
        self.calls = 0

    def prompt_for(self, pair: Pair) -> Prompt:
        return self.prompts[language_of(pair.query, pair.passage)]

    def describe(self) -> dict[str, Any]:
        prompts = {
            language: {"sha256": prompt.sha256, "file": prompt.origin}
            for language, prompt in sorted(self.prompts.items())
        }
        return {"kind": self.kind, "model": self.model, "url": self.url, "prompts": prompts}

    def name_fields(self, pair: Pair) -> dict[str, Any]:
        return {
            "judge": self.kind,
            "model": self.model,
            "prompt_sha256": self.prompt_for(pair).sha256,
        }

    def cache_key(self, pair: Pair) -> list[str]:
        return [pair.query, pair.passage, self.prompt_for(pair).sha256, self.model]

    def from_cache(self, entry: dict[str, Any]) -> Verdict:
        return Verdict(
            entry["judge_grade"], entry["raw_answer"], cost=entry.get("cost"), cached=True
        )

    def to_cache(self, verdict: Verdict) -> dict[str, Any] | None:
        if verdict.grade is None:
            return None
        return {"judge_grade": verdict.grade, "raw_answer": verdict.raw, "cost": verdict.cost}

    def _headers(self) -> dict[str, str]:
        key = os.environ.get(self.settings.api_key_env, "") if self.settings.api_key_env else ""
        return {"Authorization": f"Bearer {key}"} if key else {}

    def judge(self, pairs: Sequence[Pair], done: Done) -> None:
        """Every pair's verdict, `concurrency` at a time. When the first `unreachable_after`
        answers are all connection failures (nothing listens at the URL), the pairs not yet
        asked are not asked: each is unjudged, saying so, instead of being retried one by one
        against an endpoint that is down."""
        if not pairs:
            return
        s = self.settings
        unreachable_after = max(2 * s.concurrency, 10)
        connections = Connections(self.url, s.timeout_s, self._headers())
        pool = ThreadPoolExecutor(s.concurrency, thread_name_prefix="judge")
        reached = False
        refused = 0
        try:
            with progress(f"judging ({self.kind} {self.model})", len(pairs), "pair") as bar:
                futures: dict[Future[Verdict], int] = {
                    pool.submit(self._ask, connections, pair): i for i, pair in enumerate(pairs)
                }
                for future in as_completed(futures):
                    if future.cancelled():
                        continue
                    verdict = future.result()
                    done(futures[future], verdict)
                    bar.update(1)
                    down = (verdict.unjudged or "").startswith("connection:")
                    reached = reached or not down
                    refused += down
                    if not reached and refused == unreachable_after:
                        self._give_up(futures, done, refused)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
            connections.close()

    def _give_up(self, futures: Mapping[Future[Verdict], int], done: Done, refused: int) -> None:
        """Every pair not asked yet: unjudged, the endpoint unreachable."""
        reason = (
            f"connection: not asked: the first {refused} requests to {self.url} could not "
            "connect (is the endpoint up?)"
        )
        for future, i in futures.items():
            if future.cancel():
                done(i, Verdict(None, None, unjudged=reason))

    def _ask(self, connections: Connections, pair: Pair) -> Verdict:
        """One pair: its attempts, then its verdict (unjudged with the last failure)."""
        body = json.dumps(
            {
                "model": self.model,
                "messages": [
                    {
                        "role": "user",
                        "content": self.prompt_for(pair).render(pair.query, pair.passage),
                    }
                ],
                "temperature": 0,
                "max_tokens": self.settings.max_tokens,
            },
            ensure_ascii=False,
        ).encode()
        timeout = f"--timeout-s={self.settings.timeout_s:g}"
        verdict, failed, attempts = with_retries(
            lambda: self._verdict(post_json(connections, body, timeout)),
            self.settings.retries,
            self.settings.retry_backoff_s,
            connections.closed,
        )
        self.calls += attempts
        if verdict is None:
            assert failed is not None
            return Verdict(None, None, unjudged=f"{failed.kind}: {failed}")
        return verdict

    def _verdict(self, payload: Any) -> Verdict:
        """The grade of one answer, or AttemptFailed."""
        try:
            content = payload["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            found = sorted(payload) if isinstance(payload, dict) else type(payload).__name__
            raise AttemptFailed(
                "malformed_response",
                f"no choices[0].message.content in the answer (found {found}): is --url a "
                "chat-completions endpoint?",
            ) from None
        if not isinstance(content, str):
            raise AttemptFailed("malformed_response", f"message content {content!r} is not text")
        try:
            grade = parse_grade(content)
        except NotAGrade as exc:
            raise AttemptFailed("not_a_grade", str(exc), retry=True) from None
        return Verdict(grade, content, cost=self._cost(payload.get("usage")))

    def _cost(self, usage: Any) -> dict[str, Any] | None:
        """The call's token usage (and its price when the prices are given); None when the
        endpoint reported none."""
        if not isinstance(usage, dict):
            return None
        tokens = [usage.get("prompt_tokens"), usage.get("completion_tokens")]
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in tokens):
            return None
        prompt_tokens, completion_tokens = int(tokens[0] or 0), int(tokens[1] or 0)
        cost: dict[str, Any] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
        }
        s = self.settings
        if s.usd_per_mtok_in is not None and s.usd_per_mtok_out is not None:
            usd = prompt_tokens * s.usd_per_mtok_in + completion_tokens * s.usd_per_mtok_out
            cost["usd"] = usd / 1e6
        return cost

    def to_scale(self, grade: int) -> int:
        return self._to_scale(grade)
