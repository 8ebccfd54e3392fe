"""What a person reads holds data, not noise: tables leave out the rows and columns that hold
no value and say which, a sweep job prints one line, and cache keys and paths stay at DEBUG."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import compose_config, mini_overrides, run_app

from retrieval_bench.config import RunConfig
from retrieval_bench.config.text import TextConfig
from retrieval_bench.encoders.cache import EmbeddingCache
from retrieval_bench.errors import ConfigError
from retrieval_bench.job.result import JobResult
from retrieval_bench.job.runner import run_job
from retrieval_bench.reports.console import job_line, job_summary, table_heading
from retrieval_bench.reports.families import headline_section
from retrieval_bench.reports.markdown import job_report
from retrieval_bench.reports.tables import fmt, trim_empty
from retrieval_bench.retrievers.dense_index import DenseIndexConfig, FaissIndex, check_index_fits
from retrieval_bench.text.token_cache import tokenize_corpus
from retrieval_bench.text.tokenizer import Tokenizer

HEX64 = re.compile(r"[0-9a-f]{64}")


def test_trim_empty_names_the_rows_and_columns_it_leaves_out() -> None:
    header = ["type", "n", "recall@6", "judged@6", "ndcg@6"]
    rows = [
        ["entity_exact", 3, 1.0, None, 0.9],
        ["no_answer", 0, None, None, None],
        ["all", 3, 1.0, None, 0.9],
    ]
    counts = {"by_type": {"no_answer": {"scored": 0, "excluded": {"no_answer": 13}}}}
    assert trim_empty(header, rows, counts=counts) == (
        ["type", "n", "recall@6", "ndcg@6"],
        [["entity_exact", 3, 1.0, 0.9], ["all", 3, 1.0, 0.9]],
        [
            "types without scored queries: no_answer (13 queries; excluded: no_answer 13)",
            "columns without a value in any row: judged@6",
        ],
    )


def test_trim_empty_keeps_a_table_that_has_nothing_at_all() -> None:
    """With no value anywhere there is nothing to trim to: the caller reports the exclusions."""
    rows = [["x", 0, None], ["all", 0, None]]
    assert trim_empty(["type", "n", "recall@6"], rows) == (
        ["type", "n", "recall@6"],
        [["all", 0, None]],
        ["types without scored queries: x"],
    )


@pytest.fixture(scope="module")
def mini_job(tmp_path_factory: pytest.TempPathFactory) -> JobResult:
    """The mini fixture through BM25 in-process (it has one `no_answer` query and no roles)."""
    tmp = tmp_path_factory.mktemp("mini")
    return run_job(compose_config(["retriever=bm25", *mini_overrides(tmp)]))


def test_console_table_leaves_out_no_answer_and_says_why(mini_job: JobResult) -> None:
    text = job_summary(mini_job, 6, Path("/out"))
    lines = text.splitlines()
    assert lines[1] == (
        "mini: final stage (the cut to top 6), passages scored, macro means per query type"
    )
    assert [line.split()[0] for line in lines[4:10]] == [
        "constraint_dense",
        "entity_exact",
        "fuzzy_intent",
        "multi_hop",
        "negation",
        "all",
    ]
    assert lines[10] == "types without scored queries: no_answer (1 query; excluded: no_answer 1)"
    assert "undef" not in text
    assert "no_answer   " not in text  # no row for it


def test_the_terminal_says_which_stage_and_unit_its_table_shows() -> None:
    # With a context stage and scoring.unit=doc, the table is still `final`, by document.
    metrics = {"unit": "doc", "stages": {"bm25": {}, "final": {}, "context": {}}}
    assert table_heading("travel", metrics, 6).splitlines() == [
        "travel: final stage (the cut to top 6), documents (scoring.unit=doc) scored, macro "
        "means per query type",
        "(later stage context: scored in report.md and metrics.json)",
    ]


def test_report_headline_has_only_blocks_with_data(mini_job: JobResult) -> None:
    lines = "\n".join(headline_section(mini_job.metrics, 6, [])).splitlines()
    table = [line for line in lines if line.startswith("| type")]
    # doc and evidence hold data; readable equals doc (no ACLs), entities and leak scored
    # nothing (no expected entities, no user roles): 16 columns before, 7 now.
    assert table == ["| type | n doc | recall@6 | hit@6 | ndcg@6 | n evidence | evidence_chain@6 |"]
    assert (
        "blocks left out: readable (equal to doc on every row), entities (no scored queries), "
        "leak (no scored queries)"
    ) in lines
    assert "- leak: scored 0 queries; excluded: no_user_role 9" in lines
    assert "types without scored queries: no_answer (1 query; excluded: no_answer 1)" in lines
    assert sum(line.startswith("| ") for line in lines) == 7  # header and 6 rows (no no_answer)
    assert not any("undef" in line for line in lines if line.startswith("| "))


def test_report_family_tables_hold_no_empty_rows(mini_job: JobResult) -> None:
    report = job_report(mini_job, {"top_k": 6, "retriever": {"name": "bm25"}})
    rows = [line for line in report.splitlines() if line.startswith("| no_answer ")]
    # The refusal table is the one place the no_answer type has numbers.
    assert rows == ["| no_answer | 1 | refuse | 1.000 |"]
    leak = report.split("### `leak`", 1)[1].split("###", 1)[0]
    # The leak family scored nothing: its exclusions say why, and no table of undef follows.
    assert "scored 0 queries; excluded: no_user_role 9" in leak
    assert "| type |" not in leak


def test_sweep_job_line_is_one_line(mini_job: JobResult) -> None:
    overall = mini_job.metrics["stages"]["final"]["overall"]
    line = job_line(mini_job, 6, Path("/out/0-retriever=bm25"), "0 retriever=bm25")
    assert line == (
        f"job 0 retriever=bm25: ndcg@6 {fmt(overall['ndcg@6'])}, recall@6 "
        f"{fmt(overall['recall@6'])}; scored 6 queries; excluded: gold_missing_from_corpus 1, "
        "no_answer 1, unreviewed 1; empty rankings: no_matching_terms 2 -> /out/0-retriever=bm25"
    )


@pytest.mark.slow
def test_multirun_prints_one_line_per_job_then_the_comparison(tmp_path: Path) -> None:
    proc = run_app(
        [
            "-m",
            "retriever=bm25",
            "top_k=2,3",
            f"hydra.sweep.dir={tmp_path / 'sweep'}",
            *mini_overrides(tmp_path),
        ]
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    jobs = [line for line in out if line.startswith("job ")]
    assert [line.split(":")[0] for line in jobs] == [
        "job 0 dataset.name=mini,retriever=bm25,top_k=2",
        "job 1 dataset.name=mini,retriever=bm25,top_k=3",
    ]
    assert not any(line.startswith("mini: final stage") for line in out)
    assert any(line.startswith("== mini: 2 configurations") for line in out)


class _Encoder:
    def identity(self) -> dict[str, Any]:
        return {"kind": "fake"}

    def encode_passages(self, texts: list[str]) -> np.ndarray:
        return np.eye(len(texts), 4, dtype=np.float32)

    encode_queries = encode_passages


def test_cache_keys_and_paths_are_debug_only(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="retrieval_bench")
    texts = ["北京是中国的首都。", "深圳"]
    tokenizer = Tokenizer(TextConfig())
    cache = EmbeddingCache(tmp_path / "embeddings")
    for _ in range(2):  # a miss, then a hit
        tokenize_corpus(texts, tokenizer.tokenize, tokenizer.identity(), tmp_path / "tokens")
        cache.encode(_Encoder(), texts, "passages")
    info = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    debug = [r.getMessage() for r in caplog.records if r.levelno < logging.INFO]
    assert not any(HEX64.search(m) or str(tmp_path) in m for m in info)
    caches = ("retrieval_bench.text.token_cache", "retrieval_bench.encoders.cache")
    assert [r.getMessage() for r in caplog.records if r.name in caches and r.levelno > 10] == [
        "tokenising 2 passages (not in the token cache)",
        "encoding 2 passages (not in the embedding cache)",
    ]
    # The details are still there for whoever asks for DEBUG.
    assert sum(bool(HEX64.search(m)) for m in debug) == 4
    assert sum(str(tmp_path) in m for m in debug) == 3


def _compose(tmp: Path, *overrides: str) -> RunConfig:
    return compose_config([*overrides, *mini_overrides(tmp)])


def test_ivf_with_more_lists_than_passages_is_refused_before_encoding(tmp_path: Path) -> None:
    cfg = _compose(tmp_path, "retriever=dense", "arms.dense.index='IVF1024,Flat'")
    with pytest.raises(ConfigError) as err:
        run_job(cfg)
    assert err.value.key == "arms.dense.index"
    assert str(err.value) == (
        "config key 'arms.dense.index': 'IVF1024,Flat' needs at least 1024 training vectors "
        "(1024 IVF lists), but the corpus has 12 passages; use Flat, HNSW32 or IVF<n>,Flat "
        "with n <= 1 (FAISS wants 39 vectors per list)"
    )
    assert not (tmp_path / "cache" / "embeddings").exists()  # nothing was encoded


def test_index_without_selectors_is_refused_before_encoding_when_the_job_filters(
    tmp_path: Path,
) -> None:
    cfg = _compose(tmp_path, "retriever=dense", "arms.dense.index=PQ1x2")
    with pytest.raises(ConfigError) as err:
        run_job(cfg)
    assert str(err.value) == (
        "config key 'arms.dense.index': 'PQ1x2' does not accept FAISS id selectors, and this job "
        "filters (city) before ranking; use Flat, HNSW<M> or IVF<n>,... (or turn those "
        "filters off: filters.city=false)"
    )
    assert not (tmp_path / "cache" / "embeddings").exists()


def test_index_checks_at_start() -> None:
    check_index_fits(DenseIndexConfig(index="IVF4,Flat"), 304, 512, ("city",))
    check_index_fits(DenseIndexConfig(index="HNSW32"), 304, 512, ("city", "permissions"))
    check_index_fits(DenseIndexConfig(index="PQ8"), 304, 512, ())  # no filter: PQ is fine
    with pytest.raises(
        ConfigError,
        match=r"needs at least 256 training vectors \(256 centroids "
        r"per PQ sub-quantizer\), but arms.dense.train_size=100;",
    ):
        check_index_fits(DenseIndexConfig(index="IVF4,PQ8", train_size=100), 304, 512, ())
    with pytest.raises(ConfigError, match="does not accept FAISS id selectors"):
        check_index_fits(DenseIndexConfig(index="PQ8"), 304, 512, ("permissions",))


def test_faiss_training_warnings_are_logged_once(
    capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """PQ4 trains 4 sub-quantizers of 256 centroids on 300 vectors: FAISS prints the same
    warning 4 times; it is logged once, with the count, and nothing reaches stderr."""
    caplog.set_level(logging.INFO, logger="retrieval_bench")
    vectors = np.random.default_rng(0).standard_normal((300, 16)).astype(np.float32)
    FaissIndex(vectors, DenseIndexConfig(index="PQ4"))
    assert "clustering" not in capfd.readouterr().err
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "FAISS: WARNING clustering 300 points to 256 centroids: please provide at least 9984 "
        "training points (printed 4 times)"
    ]


def test_faiss_load_messages_stay_below_the_default_log_level(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # faiss logs at INFO which CPU build it tries ("Could not load library with AVX512 support
    # ..."): with the app's INFO console they looked like errors on every command.
    import retrieval_bench.retrievers.dense  # noqa: F401  (imports faiss)

    caplog.set_level(logging.INFO)  # the root at the app's default level
    assert not logging.getLogger("faiss.loader").isEnabledFor(logging.INFO)
    assert logging.getLogger("faiss.loader").isEnabledFor(logging.WARNING)
