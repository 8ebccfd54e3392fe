"""Small datasets written on the fly: JSONL rows, a three-passage BEIR folder, and a copy of the
mini fixture's corpus with a malformed line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from conftest import FIXTURE


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
