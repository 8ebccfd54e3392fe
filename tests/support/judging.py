"""What the judge tests share: the stand-in's expected
grade of a pool record, and the travel set with people's grade-0 labels added."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import ROOT

from support.datasets import read_jsonl
from support.judge_server import rule_grade

TRAVEL = ROOT / "evalsets" / "travel.jsonl"

TRAVEL_CORPUS = ROOT / "corpus" / "travel"


def expected_grade(record: dict[str, Any], relevant_from: int = 2) -> tuple[int, int]:
    """(the stand-in's 0-3 grade of a pool record's pair, that grade on a 0,1 scale)."""
    title = record.get("title") or ""
    passage = f"{title}\n{record['text']}" if title else record["text"]
    grade = rule_grade(record["query"], passage)
    return grade, int(grade >= relevant_from)


def with_people_zeros(tmp: Path, graded: bool = False) -> Path:
    """The travel set with people's grade-0 judgements added (two passages per reviewed query,
    chosen by position), and on `graded` its relevant labels spread over grades 1-3: labels of
    more than one grade, as filled pools give them."""
    ids = [json.loads(line)["id"] for line in (TRAVEL_CORPUS / "passages.jsonl").open()]
    lines = []
    for i, record in enumerate(read_jsonl(TRAVEL)):
        relevance: dict[str, int] = {}
        if graded:
            relevance = {pid: 1 + (len(pid) + i) % 3 for pid in record["relevant_ids"]}
        if record["label_status"] == "reviewed":
            for pid in (ids[(7 * i) % len(ids)], ids[(13 * i + 5) % len(ids)]):
                if pid not in record["relevant_ids"]:
                    relevance[pid] = 0
        if relevance:
            record["relevance"] = relevance
        lines.append(json.dumps(record, ensure_ascii=False) + "\n")
    path = tmp / "travel.jsonl"
    path.write_text("".join(lines), encoding="utf-8")
    return path
