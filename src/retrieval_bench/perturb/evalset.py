"""Perturbing a set of queries, and reading a perturbed set back against the originals.

A variant is the original query with its text rewritten: id `<original id>~<kind>`, the same
type, label status and labels (relevance, entities, cities, role, hops), and `meta`
`{"perturbed_from": <original id>, "perturbation": {"kind", "library", "changes"...}}`. A kind
that cannot change a query makes no variant of it; the report counts those, by reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from retrieval_bench.data.evalset import evalset_record, load_evalset
from retrieval_bench.data.jsonl import read_jsonl
from retrieval_bench.errors import DataError
from retrieval_bench.io.atomic import atomic_write_text
from retrieval_bench.io.folders import holds_other_content
from retrieval_bench.io.strict_json import jsonl_text
from retrieval_bench.perturb.base import Perturbation, Variant, rng_for
from retrieval_bench.progress import progress
from retrieval_bench.records import PERTURBATION, PERTURBED_FROM, EvalQuery

VARIANT_SEPARATOR = "~"


@dataclass
class KindReport:
    """What one kind did to a set: variants made, queries left out by reason."""

    kind: str
    library: str
    variants: int = 0
    left_out: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        reasons = ", ".join(f"{reason}: {n}" for reason, n in sorted(self.left_out.items()))
        left = sum(self.left_out.values())
        text = f"{self.kind} ({self.library}): {self.variants} variants"
        return text + (f", {left} queries left out ({reasons})" if left else "")


def variant_id(query_id: str, kind: str) -> str:
    return f"{query_id}{VARIANT_SEPARATOR}{kind}"


def make_variant(original: EvalQuery, kind: str, library: str, variant: Variant) -> EvalQuery:
    """The variant query: the original's labels, the new text, the link and what changed."""
    perturbation = {"kind": kind, "library": library, **variant.changes}
    return replace(
        original,
        query_id=variant_id(original.query_id, kind),
        query=variant.text,
        meta={PERTURBED_FROM: original.query_id, PERTURBATION: perturbation},
    )


def perturb_queries(
    queries: Sequence[EvalQuery], kinds: Sequence[Perturbation], seed: int
) -> tuple[list[EvalQuery], list[KindReport]]:
    """Every kind's variant of every query (grouped by query, kinds in order), and each kind's
    report."""
    reports = [KindReport(k.kind, k.library()) for k in kinds]
    variants: list[EvalQuery] = []
    for query in progress("perturbing queries", len(queries), "query", queries):
        for kind, report in zip(kinds, reports, strict=True):
            made = kind.apply(query, rng_for(seed, kind.kind, query.query_id))
            if isinstance(made, str):
                report.left_out[made] = report.left_out.get(made, 0) + 1
                continue
            variants.append(make_variant(query, kind.kind, report.library, made))
            report.variants += 1
    return variants, reports


def write_perturbed(path: Path, variants: Sequence[EvalQuery]) -> None:
    """The variants as a native evaluation set, written whole. A file holding anything else
    is refused, not replaced (as `run.pool` refuses to replace a pool file): an evaluation set
    replaced by variants would be lost, labels and all."""
    text = jsonl_text([evalset_record(q) for q in variants])
    if holds_other_content(path, text):
        raise DataError(
            path,
            "exists with other content, which a perturbed set never replaces: pass another "
            "--out, or move the old file away",
        )
    atomic_write_text(path, text)


def load_perturbed(path: Path, originals: Mapping[str, EvalQuery]) -> list[EvalQuery]:
    """A perturbed set's variants, each checked against the job's queries: it must say what it
    is a variant of (`meta.perturbed_from`, naming a query of the job) and which kind
    (`meta.perturbation.kind`). DataError with the file and line of the first that does not."""
    queries = load_evalset(path)
    lines = [number for number, _ in read_jsonl(path)]
    for number, query in zip(lines, queries, strict=True):
        source = query.perturbed_from
        if source is None:
            raise DataError(path, f"query {query.query_id!r} has no meta.{PERTURBED_FROM}", number)
        if source not in originals:
            raise DataError(
                path,
                f"query {query.query_id!r}: meta.{PERTURBED_FROM} names {source!r}, "
                "which is not a query of this job",
                number,
            )
        perturbation = query.meta.get(PERTURBATION)
        if not isinstance(perturbation, dict) or not isinstance(perturbation.get("kind"), str):
            raise DataError(
                path, f"query {query.query_id!r} has no meta.{PERTURBATION}.kind", number
            )
    return queries


def kind_of(query: EvalQuery) -> str:
    """A variant's kind (`meta.perturbation.kind`)."""
    return str((query.meta.get(PERTURBATION) or {}).get("kind", "unknown"))
