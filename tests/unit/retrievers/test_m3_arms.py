"""BGE-M3's three outputs as arms: their scores are FlagEmbedding's own, the arms share one
encode and one cache entry, and that entry is plain arrays (no pickle).

The model is a tiny random XLM-RoBERTa with BGE-M3's heads, built by the test
(random_models), so nothing is downloaded."""

from __future__ import annotations

import json
from importlib import import_module
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import compose_config
from support.random_models import SAMPLE_SENTENCES, TINY, build_random_bge_m3

from retrieval_bench.config import RunConfig
from retrieval_bench.config.m3 import M3ArmConfig
from retrieval_bench.encoders.m3 import M3Cache, M3Encoder
from retrieval_bench.errors import ConfigError, EncoderUnavailable
from retrieval_bench.plugins import instantiate_plugin
from retrieval_bench.protocols import BuildContext
from retrieval_bench.records import FILTERED_OUT, EvalQuery, Passage
from retrieval_bench.retrievers.m3 import M3Arm, M3Scorer, M3Spec, clear_m3_memo
from retrieval_bench.tiebreak import shared_tie_break

MAX_LENGTH = 64
PASSAGES = [Passage(id=f"p{i}", text=text) for i, text in enumerate(SAMPLE_SENTENCES)]
QUERIES = [
    EvalQuery(query_id=f"q{i}", query=text, query_type="t", label_status="reviewed")
    for i, text in enumerate(["北京是中国的首都", "我喜欢吃苹果", "The quick brown fox", "交通"])
]
WEIGHTS = [0.4, 0.2, 0.4]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import_module("FlagEmbedding")  # a broken install fails here, never skips
    target = tmp_path_factory.mktemp("tiny-bge-m3")
    build_random_bge_m3(target, TINY, SAMPLE_SENTENCES)
    return target


@pytest.fixture(scope="module")
def reference(model_dir: Path) -> Any:
    """FlagEmbedding's own BGE-M3 model, loaded apart from the project's code (in float32: its
    default, use_fp16=True, loads fp16-rounded weights even on a CPU)."""
    from FlagEmbedding import BGEM3FlagModel

    return BGEM3FlagModel(
        str(model_dir),
        devices=["cpu"],
        use_fp16=False,
        query_max_length=MAX_LENGTH,
        passage_max_length=MAX_LENGTH,
    )


def _context(model_dir: Path, cache_dir: Path, **m3: Any) -> BuildContext:
    """A job's context whose `arms.m3` node holds the model and `m3` (weights, ...)."""
    cfg = RunConfig()
    cfg.arms["m3"] = {**cfg.arms["m3"], "model": str(model_dir), "max_length": MAX_LENGTH, **m3}
    return BuildContext(
        passages=PASSAGES,
        queries=QUERIES,
        cfg=cfg,
        tie_break=shared_tie_break([p.id for p in PASSAGES]),
        cache_dir=cache_dir,
    )


def _model(model_dir: Path) -> M3ArmConfig:
    return M3ArmConfig(mode="all", model=str(model_dir), max_length=MAX_LENGTH)


def _build(mode: str, ctx: BuildContext, **kwargs: Any) -> M3Arm:
    """The `mode` arm as the shipped `m3_<mode>` node makes it: `arms.m3`'s settings, and
    `kwargs` of its own."""
    base = {k: v for k, v in ctx.cfg.arms["m3"].items() if k not in ("_target_", "mode")}
    return M3Spec(mode=mode, **{**base, **kwargs}).build(f"m3_{mode}", ctx)


def _flag_scores(reference: Any, query: str) -> dict[str, np.ndarray]:
    """compute_score for (query, every passage), one pair per batch so nothing is padded."""
    out = reference.compute_score(
        [(query, p.text) for p in PASSAGES],
        batch_size=1,
        weights_for_different_modes=WEIGHTS,
    )
    return {mode: np.asarray(scores, dtype=np.float64) for mode, scores in out.items()}


@pytest.fixture()
def fresh_memo() -> Any:
    clear_m3_memo()
    yield
    clear_m3_memo()


@pytest.mark.slow
def test_each_arm_scores_as_flagembedding_compute_score(
    model_dir: Path, reference: Any, tmp_path: Path, fresh_memo: None
) -> None:
    ctx = _context(model_dir, tmp_path, weights=WEIGHTS)
    arms = {mode: _build(mode, ctx) for mode in ("dense", "sparse", "colbert", "all")}
    flag_mode = {
        "dense": "dense",
        "sparse": "sparse",
        "colbert": "colbert",
        "all": "colbert+sparse+dense",
    }
    k = len(PASSAGES)
    sparse_matches = 0
    for query in QUERIES:
        expected = _flag_scores(reference, query.query)
        sparse_matches += int((expected["sparse"] > 0).sum())
        for mode, arm in arms.items():
            [ranked] = arm.search([query], k, [None])
            want = expected[flag_mode[mode]]
            # Every passage (sparse: every one sharing a token), each with FlagEmbedding's score
            # to float32 precision, best first (the order among near-equal scores is the
            # tie-break's, tested with the other arms).
            retrieved = np.flatnonzero(want > 0) if mode == "sparse" else np.arange(k)
            assert sorted(ranked.indices.tolist()) == retrieved.tolist(), (mode, query.query)
            np.testing.assert_allclose(ranked.scores, want[ranked.indices], rtol=0, atol=1e-6)
            assert np.all(np.diff(ranked.scores) <= 0)
    assert sparse_matches >= 3  # the sparse comparison is not all zeros


@pytest.mark.slow
def test_outputs_score_as_flagembedding_pair_functions(
    model_dir: Path, reference: Any, tmp_path: Path
) -> None:
    """The cached arrays give back FlagEmbedding's lexical weights and ColBERT vectors: its
    `compute_lexical_matching_score` and `colbert_score` on them equal the arms' scores."""
    encoder = M3Encoder(_model(model_dir).encoder_config())
    cache = M3Cache(tmp_path)
    corpus, _ = cache.encode(encoder, [p.text for p in PASSAGES], "passages")
    queries, _ = cache.encode(encoder, [q.query for q in QUERIES], "queries")
    flag = reference.encode(
        [q.query for q in QUERIES], return_dense=True, return_sparse=True, return_colbert_vecs=True
    )
    ctx = _context(model_dir, tmp_path)
    sparse, colbert = _build("sparse", ctx), _build("colbert", ctx)
    every = np.arange(len(PASSAGES))
    for qi in range(len(QUERIES)):
        assert queries.lexical_weights(qi) == pytest.approx(
            {t: float(w) for t, w in flag["lexical_weights"][qi].items()}, abs=1e-6
        )
        np.testing.assert_allclose(queries.colbert(qi), flag["colbert_vecs"][qi], atol=1e-6)
        lexical = [
            reference.compute_lexical_matching_score(
                queries.lexical_weights(qi), corpus.lexical_weights(i)
            )
            for i in every
        ]
        maxsim = [
            float(reference.colbert_score(queries.colbert(qi), corpus.colbert(i))) for i in every
        ]
        np.testing.assert_allclose(sparse.scorer.sparse(queries, qi, every), lexical, atol=1e-6)
        np.testing.assert_allclose(colbert.scorer.colbert(queries, qi, every), maxsim, atol=1e-6)


@pytest.mark.slow
def test_arms_share_one_encode_and_the_cache_is_plain_arrays(
    model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_memo: None
) -> None:
    calls: list[tuple[str, int]] = []
    original = M3Encoder.encode_outputs

    def counting(self: M3Encoder, texts: list[str], role: str) -> Any:
        calls.append((role, len(texts)))
        return original(self, texts, role)

    monkeypatch.setattr(M3Encoder, "encode_outputs", counting)
    ctx = _context(model_dir, tmp_path)
    arms = [_build(mode, ctx) for mode in ("dense", "sparse", "colbert", "all")]
    assert calls == [("passages", len(PASSAGES)), ("queries", len(QUERIES))]
    counts = {"m3_passages": {"encoded": 7, "cached": 0}, "m3_queries": {"encoded": 4, "cached": 0}}
    assert ctx.stats["embeddings"] == counts
    assert arms[3].info() == {
        "kind": "bge_m3",
        "mode": "all",
        "model": model_dir.name,
        "weights": {"dense": 0.4, "sparse": 0.2, "colbert": 0.4},
        "colbert_depth": "all",
    }

    # The entry on disk: .npz arrays that load without pickles, and a JSON sidecar.
    entries = sorted((tmp_path / "m3").rglob("*.npz"))
    assert len(entries) == 2
    for entry in entries:
        with np.load(entry, allow_pickle=False) as data:
            assert sorted(data.files) == sorted(
                [
                    "colbert_offsets",
                    "colbert_vectors",
                    "dense",
                    "sparse_data",
                    "sparse_indices",
                    "sparse_indptr",
                ]
            )
            assert all(data[name].dtype != object for name in data.files)
        assert json.loads(entry.with_suffix(".json").read_text())["count"] in (7, 4)

    # A new job in a new process (no memo) reads the disk cache: nothing is encoded.
    clear_m3_memo()
    calls.clear()
    again = _context(model_dir, tmp_path)
    _build("all", again)
    assert calls == []
    assert again.stats["embeddings"] == {
        "m3_passages": {"encoded": 0, "cached": 7},
        "m3_queries": {"encoded": 0, "cached": 4},
    }


@pytest.mark.slow
def test_a_corrupt_cache_entry_is_rebuilt(
    model_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    encoder = M3Encoder(_model(model_dir).encoder_config())
    cache = M3Cache(tmp_path)
    texts = [p.text for p in PASSAGES]
    first, _ = cache.encode(encoder, texts, "passages")
    [entry] = tmp_path.rglob("*.npz")
    entry.write_bytes(entry.read_bytes()[:100])  # truncated, as by a full disk
    again, stats = cache.encode(encoder, texts, "passages")
    assert (stats.encoded, stats.cached) == (7, 0)
    assert "invalid" in caplog.text
    np.testing.assert_array_equal(again.colbert_vectors, first.colbert_vectors)
    assert cache.encode(encoder, texts, "passages")[1].cached == 7


@pytest.mark.slow
def test_filters_apply_before_ranking(model_dir: Path, tmp_path: Path, fresh_memo: None) -> None:
    ctx = _context(model_dir, tmp_path)
    allowed = np.zeros(len(PASSAGES), dtype=bool)
    allowed[[1, 4]] = True
    for mode in ("dense", "colbert", "all"):
        arm = _build(mode, ctx)
        [whole] = arm.search([QUERIES[0]], len(PASSAGES), [None])
        [kept, none] = arm.search(
            [QUERIES[0], QUERIES[0]], 2, [allowed, np.zeros(len(PASSAGES), dtype=bool)]
        )
        assert kept.indices.tolist() == [i for i in whole.indices.tolist() if allowed[i]]
        assert none.returned == 0 and none.empty_reason == FILTERED_OUT


@pytest.mark.slow
def test_colbert_depth_scores_the_dense_and_sparse_union(
    model_dir: Path, tmp_path: Path, fresh_memo: None
) -> None:
    ctx = _context(model_dir, tmp_path)
    exact = _build("all", ctx)
    shallow = _build("all", ctx, colbert_depth=1)
    deep = _build("all", ctx, colbert_depth=len(PASSAGES))
    n = len(PASSAGES)
    dense, sparse = _build("dense", ctx), _build("sparse", ctx)
    for query in QUERIES:
        [whole] = exact.search([query], n, [None])
        [top] = deep.search([query], n, [None])
        assert top.indices.tolist() == whole.indices.tolist()
        [few] = shallow.search([query], n, [None])
        first = dense.search([query], 1, [None])[0].indices.tolist()
        first += sparse.search([query], 1, [None])[0].indices.tolist()
        kept = [i in first for i in whole.indices.tolist()]
        assert few.indices.tolist() == whole.indices[kept].tolist()
        np.testing.assert_allclose(few.scores, whole.scores[kept], rtol=0, atol=1e-6)
    assert shallow.info()["colbert_depth"] == 1 and exact.info()["colbert_depth"] == "all"


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("arms.m3.weights=[0.5,0.5]", "arms.m3.weights"),
        ("arms.m3.weights=[1.0,-1.0,1.0]", "arms.m3.weights"),
        ("arms.m3.weights=[0.0,0.0,0.0]", "arms.m3.weights"),
        ("arms.m3.colbert_depth=-1", "arms.m3.colbert_depth"),
        ("arms.m3.max_length=0", "arms.m3.max_length"),
        ("arms.m3.devices=[gpu]", "arms.m3.devices"),
        ("arms.m3.precision=int4", "arms.m3.precision"),
        ("arms.m3_dense.precision=int4", "arms.m3_dense.precision"),
    ],
)
def test_bad_m3_values_name_their_key(override: str, key: str) -> None:
    """Checked when the config is read, whether or not the job runs the arm."""
    with pytest.raises(ConfigError) as err:
        compose_config([override])
    assert err.value.key == key
    assert key in str(err.value) and "encoder." not in str(err.value)


def test_a_missing_model_names_the_m3_keys(tmp_path: Path) -> None:
    ctx = _context(tmp_path / "no-such-model", tmp_path)
    with pytest.raises(EncoderUnavailable) as err:
        _build("all", ctx)
    message = str(err.value)
    assert (
        f"arms.m3 model '{tmp_path / 'no-such-model'}' cannot be loaded: no directory at"
        in message
    )
    assert "Set arms.m3.model=/local/path/to/no-such-model" in message
    assert "encoder" not in message


def test_unknown_mode_is_refused() -> None:
    with pytest.raises(ConfigError, match="dense, sparse, colbert, all"):
        M3Spec(mode="splade")


@pytest.mark.parametrize(
    ("overrides", "key", "says"),
    [
        ({"weights": [1.0, 2.0]}, "arms.m3x.weights", "needs three weights"),
        ({"colbert_depth": -2}, "arms.m3x.colbert_depth", "positive depth"),
        ({"wieghts": [1.0, 1.0, 1.0]}, "arms.m3x.wieghts", "did you mean 'weights'?"),
    ],
)
def test_an_arms_keywords_are_checked_with_their_key(
    overrides: dict[str, Any], key: str, says: str
) -> None:
    """An arm node's keys are the class's keyword arguments, named under the node."""
    node = {"_target_": "retrieval_bench.retrievers.m3.M3Spec", "mode": "all", **overrides}
    with pytest.raises(ConfigError) as err:
        instantiate_plugin("arms.m3x", node, "ArmSpec", ["build"])
    assert err.value.key == key and says in err.value.message


@pytest.mark.slow
def test_a_zero_weight_skips_its_output(
    model_dir: Path, reference: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """weights [1, 1, 0]: FlagEmbedding's `sparse+dense`, and ColBERT is never computed."""
    ctx = _context(model_dir, tmp_path, weights=[1.0, 1.0, 0.0])
    arm = _build("all", ctx)

    def no_colbert(*args: Any) -> Any:
        raise AssertionError("ColBERT scored with a zero weight")

    monkeypatch.setattr(M3Scorer, "colbert", no_colbert)
    for query in QUERIES:
        expected = reference.compute_score(
            [(query.query, p.text) for p in PASSAGES],
            batch_size=1,
            weights_for_different_modes=[1.0, 1.0, 0.0],
        )["sparse+dense"]
        [ranked] = arm.search([query], len(PASSAGES), [None])
        np.testing.assert_allclose(
            ranked.scores, np.asarray(expected)[ranked.indices], rtol=0, atol=1e-6
        )
