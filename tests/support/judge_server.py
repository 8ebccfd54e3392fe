"""A stand-in for a chat model behind an OpenAI-compatible endpoint, for the judge's tests: a
real HTTP server on 127.0.0.1 (tests/support/service_server.py's) whose "model" is a deterministic
rule, so every grade a test expects can be computed independently (`rule_grade`).

The rule reads the query and the passage back out of the prompt (the shipped English or
Chinese one) and grades by how many character bigrams of the query the passage holds: none
0, one 1, two or three 2, four or more 3. It answers in UMBRELA's format, `##final score: N`,
and reports token usage like an OpenAI endpoint. `misbehave` lets a test make chosen pairs
answer with prose, an HTTP error or nothing in time.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from support.service_server import Reply, serve

_EN = re.compile(r"Query: (.*?)\nPassage: (.*?)\n\nSplit this problem", re.DOTALL)
_ZH = re.compile(r"查询：(.*?)\n文本：(.*?)\n\n请分步骤", re.DOTALL)


def bigrams(text: str) -> set[str]:
    chars = [c for c in text if not c.isspace()]
    return {chars[i] + chars[i + 1] for i in range(len(chars) - 1)}


def rule_grade(query: str, passage: str) -> int:
    """The stand-in model's grade of a pair."""
    shared = len(bigrams(query) & bigrams(passage))
    return 0 if shared == 0 else 1 if shared == 1 else 2 if shared <= 3 else 3


def pair_of(prompt: str) -> tuple[str, str]:
    """(query, passage) as the prompt holds them."""
    found = _ZH.search(prompt) or _EN.search(prompt)
    assert found, f"not a shipped prompt: {prompt[:80]!r}"
    return found.group(1), found.group(2)


# What a misbehaving pair gets instead of a grade: ("prose", text), ("status", code) or
# ("hang", seconds).
Misbehaviour = Callable[[str, str], tuple[str, Any] | None]


@contextmanager
def chat_model(
    misbehave: Misbehaviour | None = None,
) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """(the API base URL, the request bodies received), while the stand-in model serves."""

    def respond(body: dict[str, Any]) -> Reply:
        assert body["temperature"] == 0 and body["messages"][0]["role"] == "user"
        prompt = body["messages"][0]["content"]
        query, passage = pair_of(prompt)
        action = misbehave(query, passage) if misbehave else None
        if action is not None:
            kind, value = action
            if kind == "status":
                return value, {"error": {"message": "stand-in failure"}}
            if kind == "hang":
                time.sleep(value)
            if kind == "prose":
                return 200, _completion(body["model"], value, prompt)
        answer = f"##final score: {rule_grade(query, passage)}"
        return 200, _completion(body["model"], answer, prompt)

    with serve(respond) as (url, received):
        yield url.rsplit("/", 1)[0] + "/v1", received


def _completion(model: str, content: str, prompt: str) -> dict[str, Any]:
    return {
        "id": "stand-in",
        "object": "chat.completion",
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": len(prompt),
            "completion_tokens": len(content),
            "total_tokens": len(prompt) + len(content),
        },
    }
