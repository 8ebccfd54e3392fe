"""One entry point for every dataset format, validated before anything is built."""

from __future__ import annotations

from pathlib import Path

from retrieval_bench.data.beir import load_beir
from retrieval_bench.data.evalset import load_evalset
from retrieval_bench.data.jsonl import file_sha256
from retrieval_bench.data.passages import load_lexicon, load_passages
from retrieval_bench.errors import DataError
from retrieval_bench.records import Dataset


def load_native(name: str, corpus_dir: Path, evalset_path: Path) -> Dataset:
    passages_path = corpus_dir / "passages.jsonl"
    lexicon_path = corpus_dir / "lexicon.jsonl"
    entities = load_lexicon(lexicon_path) if lexicon_path.is_file() else ()
    passages = load_passages(passages_path, {e.name for e in entities})
    queries = tuple(load_evalset(evalset_path))
    if not queries:
        raise DataError(evalset_path, "the evaluation set is empty: no queries")
    paths = [passages_path, evalset_path] + ([lexicon_path] if entities else [])
    return Dataset(
        name=name,
        passages=passages,
        queries=queries,
        entities=entities,
        hashes={p.name: file_sha256(p) for p in paths},
    )


def load_dataset(
    fmt: str, name: str, corpus: Path, evalset: Path, path: Path, split: str
) -> Dataset:
    if fmt == "beir":
        return load_beir(path, split=split, name=name)
    return load_native(name, corpus, evalset)
