"""Randomly initialised models with BGE-M3's layout (and a cross-encoder reranker's), saved
where FlagEmbedding can load them.

Why: the tests check the project's BGE-M3 encoder path against FlagEmbedding itself without
downloading the real model (a tiny one), and the GPU benchmark measures that same path at
BGE-M3's real size (XLM-RoBERTa large: 24 layers, hidden 1024, vocabulary 250,002) with random
weights: the speed of a forward pass does not depend on the weights' values.

The folder holds what `BGEM3FlagModel` loads: an XLM-RoBERTa encoder and its tokenizer (a
SentencePiece unigram model trained here on `sentences`, with XLM-R's special-token layout),
plus the two BGE-M3 heads, `colbert_linear.pt` (Linear(hidden, hidden)) and `sparse_linear.pt`
(Linear(hidden, 1)). The model's embedding table has `vocab_size` rows even when the trained
tokenizer is smaller, so the model's size (and memory) is the real one's. The cross-encoder
(`build_random_cross_encoder`) is the same encoder with a one-logit classification head, what
`FlagReranker` loads. Needs sentencepiece, torch and transformers (FlagEmbedding's own
dependencies).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SAMPLE_SENTENCES = (
    "今天天气很好，我们去公园散步。",
    "北京是中国的首都，也是政治文化中心。",
    "上海的交通非常方便。",
    "我喜欢吃苹果和香蕉。",
    "股票市场今天大跌。",
    "The quick brown fox jumps over the lazy dog.",
    "深度学习模型需要大量数据。",
)


@dataclass(frozen=True)
class M3Shape:
    """The encoder's size. `vocab_size=0`: as many rows as the trained tokenizer has."""

    hidden: int
    layers: int
    heads: int
    intermediate: int
    max_positions: int
    vocab_size: int = 0


TINY = M3Shape(hidden=32, layers=2, heads=2, intermediate=64, max_positions=130)
"""The tests' model: seconds to build and to run on a CPU."""
BGE_M3_SIZE = M3Shape(
    hidden=1024, layers=24, heads=16, intermediate=4096, max_positions=8194, vocab_size=250_002
)
"""BAAI/bge-m3's encoder (XLM-RoBERTa large with 8,192-token positions): 568M parameters."""


def unloadable_model(folder: Path, weights: bytes = b"") -> str:
    """A model folder the code accepts at start (a config.json and a weights file) but no model
    loads from: a test that uses one shows no model was loaded (or reads the refusal of one that
    fails), without building a real model or importing torch."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text("{}", encoding="utf-8")
    (folder / "model.safetensors").write_bytes(weights)
    return str(folder)


def save_random_tokenizer(
    target: Path, sentences: Sequence[str] = SAMPLE_SENTENCES, vocab_size: int = 120
) -> Any:
    """Train a SentencePiece unigram tokenizer on `sentences` with XLM-R's special-token layout
    and save it as an `XLMRobertaTokenizer` in `target`; returns the tokenizer."""
    import sentencepiece
    import transformers

    model_proto = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(list(sentences) * 10),
        model_writer=model_proto,
        vocab_size=vocab_size,
        hard_vocab_limit=False,
        model_type="unigram",
        character_coverage=1.0,
        bos_id=0,
        pad_id=1,
        eos_id=2,
        unk_id=3,  # the XLM-R special-token layout
        minloglevel=2,
    )
    sp = sentencepiece.SentencePieceProcessor(model_proto=model_proto.getvalue())
    vocab = [(sp.id_to_piece(i), sp.get_score(i)) for i in range(sp.get_piece_size())]
    tokenizer = transformers.XLMRobertaTokenizer(vocab=[*vocab, ("<mask>", 0.0)])
    tokenizer.save_pretrained(target)
    return tokenizer


def xlmr_config(shape: M3Shape, tokenizer: Any, **extra: Any) -> Any:
    """An `XLMRobertaConfig` of `shape` for `tokenizer` (its special ids, at least its size)."""
    import transformers

    return transformers.XLMRobertaConfig(
        vocab_size=max(shape.vocab_size, len(tokenizer)),
        hidden_size=shape.hidden,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        intermediate_size=shape.intermediate,
        max_position_embeddings=shape.max_positions,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        **extra,
    )


def build_random_bge_m3(
    target: Path,
    shape: M3Shape = TINY,
    sentences: Sequence[str] = SAMPLE_SENTENCES,
    tokenizer_vocab: int = 120,
    seed: int = 0,
) -> dict[str, Any]:
    """Save a BGE-M3-shaped model with random weights in `target`; returns the two heads'
    state dicts (`colbert`, `sparse`) so a caller can check they were loaded."""
    import torch
    import transformers

    tokenizer = save_random_tokenizer(target, sentences, tokenizer_vocab)
    torch.manual_seed(seed)
    transformers.XLMRobertaModel(xlmr_config(shape, tokenizer)).save_pretrained(target)
    colbert = torch.nn.Linear(shape.hidden, shape.hidden).state_dict()
    sparse = torch.nn.Linear(shape.hidden, 1).state_dict()
    torch.save(colbert, target / "colbert_linear.pt")
    torch.save(sparse, target / "sparse_linear.pt")
    return {"colbert": colbert, "sparse": sparse}


def build_random_cross_encoder(
    target: Path,
    shape: M3Shape = TINY,
    sentences: Sequence[str] = SAMPLE_SENTENCES,
    tokenizer_vocab: int = 120,
    seed: int = 0,
) -> None:
    """Save a cross-encoder reranker with random weights in `target`, laid out as
    BAAI/bge-reranker-v2-m3 is (an XLM-RoBERTa sequence classifier with one output, the
    relevance logit, and its tokenizer), so `FlagEmbedding.FlagReranker` loads it."""
    import torch
    import transformers

    tokenizer = save_random_tokenizer(target, sentences, tokenizer_vocab)
    torch.manual_seed(seed)
    config = xlmr_config(shape, tokenizer, num_labels=1)
    transformers.XLMRobertaForSequenceClassification(config).save_pretrained(target)


BUILDERS = {"reranker": build_random_cross_encoder, "bge-m3": build_random_bge_m3}


def main(argv: Sequence[str] | None = None) -> int:
    """`python tests/support/random_models.py {reranker,bge-m3} DIR`: the tests' tiny model (random
    weights, seconds to build) saved in DIR, to try `reranker=cross_encoder` or `encoder=bge_m3`
    / `retriever=m3` without downloading a model (needs the flag extra: pip install -e
    '.[flag]'). Its scores mean nothing: it exercises the stage, not a ranking."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python tests/support/random_models.py", description=main.__doc__
    )
    parser.add_argument("kind", choices=sorted(BUILDERS))
    parser.add_argument("target", type=Path, help="the folder to save the model in (created)")
    args = parser.parse_args(argv)
    if args.target.exists() and any(args.target.iterdir()):
        parser.error(f"{args.target} is not empty; name a new folder")
    args.target.mkdir(parents=True, exist_ok=True)
    BUILDERS[args.kind](args.target)
    print(f"saved a tiny random-weight {args.kind} model in {args.target}")
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
