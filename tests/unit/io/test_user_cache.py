"""Values kept in the user's cache (`io.user_cache`): built once, read back, a file that does not
unpickle replaced; jieba's dictionary from the store equals the one jieba builds."""

from __future__ import annotations

from pathlib import Path

import pytest

from retrieval_bench.io.user_cache import stored_or_built


def test_stored_or_built_builds_once_then_reads_and_replaces_what_does_not_unpickle(
    tmp_path: Path,
) -> None:
    path = tmp_path / "cache" / "value.pickle"
    builds: list[int] = []

    def build() -> dict[str, int]:
        builds.append(1)
        return {"a": 1, "b": 2}

    def accept(value: object) -> bool:
        return isinstance(value, dict)

    assert stored_or_built(path, build, accept) == {"a": 1, "b": 2}
    assert stored_or_built(path, build, accept) == {"a": 1, "b": 2}
    assert len(builds) == 1, "the second call read the stored value"
    path.write_bytes(b"half a pickle")
    assert stored_or_built(path, build, accept) == {"a": 1, "b": 2}
    assert len(builds) == 2 and stored_or_built(path, build, accept) == {"a": 1, "b": 2}
    assert len(builds) == 2, "the unreadable file was replaced"
    assert stored_or_built(path, lambda: [1], lambda v: isinstance(v, list)) == [1]  # refused
    blocked = tmp_path / "a-file"
    blocked.write_text("x")
    assert stored_or_built(blocked / "value.pickle", build, accept) == {"a": 1, "b": 2}


def test_jiebas_dictionary_from_the_store_is_the_one_jieba_builds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from retrieval_bench.text.tokenizer import base_dictionary

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    built = base_dictionary.__wrapped__()  # jieba's own initialize, then stored
    assert list((tmp_path / "retrieval-bench" / "jieba-dictionary").glob("*.pickle"))
    stored = base_dictionary.__wrapped__()  # read back
    assert stored == built
    assert stored[0]["北京"] > 0 and stored[1] > 0
