"""A generated native dataset whose BM25 behaviour is known in advance, for sweep/gate tests.

Per topic i there are three passages carrying the rare token `kwNNN`: `a` (token + 门票 price),
`b` (token + 交通) and `c` (token + 历史). Queries are "kwNNN 门票":

* type `pair`: relevant = a and b. BM25 ranks a first and b second or third, so recall@K is 1
  for K >= 3 and 0.5 when the pool is cut to one passage (`retriever.pool_size=1`).
* type `deep`: relevant = c only, ranked 2nd or 3rd: found at top_k >= 3, missed at top_k=1.
"""

from __future__ import annotations

from pathlib import Path

from retrieval_bench.io.strict_json import jsonl_text


def write_synthetic(root: Path, per_type: int = 10, name: str = "synth") -> list[str]:
    """Write corpus/<name>/passages.jsonl and evalsets/<name>.jsonl; returns the overrides
    that select it."""
    corpus = root / "corpus" / name
    corpus.mkdir(parents=True, exist_ok=True)
    evalsets = root / "evalsets"
    evalsets.mkdir(parents=True, exist_ok=True)
    passages = []
    queries = []
    for i in range(2 * per_type):
        kw = f"kw{i:03d}"
        passages += [
            {"id": f"t{i:03d}-a", "text": f"{kw} 门票 价格 成人 儿童"},
            {"id": f"t{i:03d}-b", "text": f"{kw} 交通 路线 公交 打车"},
            {"id": f"t{i:03d}-c", "text": f"{kw} 历史 文化 介绍 故事"},
        ]
        pair = i < per_type
        queries.append(
            {
                "query_id": f"q{i:03d}",
                "query": f"{kw} 门票",
                "query_type": "pair" if pair else "deep",
                "label_status": "reviewed",
                "relevant_ids": [f"t{i:03d}-a", f"t{i:03d}-b"] if pair else [f"t{i:03d}-c"],
            }
        )
    (corpus / "passages.jsonl").write_text(jsonl_text(passages), encoding="utf-8")
    evalset = evalsets / f"{name}.jsonl"
    evalset.write_text(jsonl_text(queries), encoding="utf-8")
    return [f"dataset.name={name}", f"dataset.corpus={corpus}", f"dataset.evalset={evalset}"]
