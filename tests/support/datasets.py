"""Small datasets written on the fly: JSONL rows, a three-passage BEIR folder, and a copy of the
mini fixture's corpus with a malformed line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from conftest import FIXTURE, ROOT


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return path


def make_beir(root: Path) -> Path:
    write_jsonl(
        root / "corpus.jsonl",
        [
            {"_id": "d1", "title": "Sun", "text": "The sun is a star."},
            {"_id": "d2", "title": "", "text": "Cats are mammals."},
            {"_id": 3, "title": "Moon", "text": "The moon orbits the earth."},
        ],
    )
    write_jsonl(
        root / "queries.jsonl",
        [
            {"_id": "q1", "text": "what is the sun", "metadata": {"query_type": "support"}},
            {"_id": "q2", "text": "are cats mammals"},
            {"_id": "q3", "text": "not judged in this split"},
        ],
    )
    (root / "qrels").mkdir()
    (root / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t2\nq2\t3\t0\n"
    )
    return root


def malformed_corpus(tmp_path: Path) -> Path:
    """A copy of the mini corpus whose 4th line of passages.jsonl is cut short (bad JSON)."""
    corpus = tmp_path / "corpus"
    shutil.copytree(FIXTURE / "corpus" / "mini", corpus)
    lines = (corpus / "passages.jsonl").read_text().splitlines()
    lines[3] = lines[3][:-5]
    (corpus / "passages.jsonl").write_text("\n".join(lines) + "\n")
    return corpus


def beir_sample(target: Path, source: Path | None, passages: int = 200, queries: int = 50) -> Path:
    """A small BEIR folder at `target`: from the BEIR folder `source` (without one, the shipped
    travel set: corpus/travel and evalsets/travel.jsonl), its first `queries` queries that have
    judgments with their judged passages, and the corpus's first passages up to `passages` in
    all (at least 100 whenever the set has them, so a page's `top_k=100` runs as written). For
    a command written for any BEIR folder that a test runs as written, in seconds."""
    (target / "qrels").mkdir(parents=True)
    if source is None:
        from retrieval_bench.data.loader import load_native

        travel = load_native(
            "travel", ROOT / "corpus" / "travel", ROOT / "evalsets" / "travel.jsonl"
        )
        records = [{"_id": p.id, "title": p.title, "text": p.text} for p in travel.passages]
        all_queries = [
            {"_id": q.query_id, "text": q.query, "metadata": {"query_type": q.query_type}}
            for q in travel.queries
        ]
        judged = [(q.query_id, pid, g) for q in travel.queries for pid, g in q.relevance.items()]
    else:
        rows = (source / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()[1:]
        judged = [(q, d, int(g)) for q, d, g in (row.split("\t") for row in rows)]
        lines = (source / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
        records = [json.loads(line) for line in lines]
        lines = (source / "queries.jsonl").read_text(encoding="utf-8").splitlines()
        all_queries = [json.loads(line) for line in lines]
    chosen = list(dict.fromkeys(q for q, _, _ in judged))[:queries]
    qrels = [row for row in judged if row[0] in chosen]
    wanted = {d for _, d, _ in qrels}
    corpus, others = [], passages - len(wanted)
    for record in records:
        if str(record["_id"]) in wanted or others > 0:
            others -= str(record["_id"]) not in wanted
            corpus.append(record)
    asked = [q for q in all_queries if str(q["_id"]) in chosen]
    write_jsonl(target / "corpus.jsonl", corpus)
    write_jsonl(target / "queries.jsonl", asked)
    tsv = "".join(f"{q}\t{d}\t{g}\n" for q, d, g in qrels)
    (target / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + tsv)
    return target
