"""A job's evaluation with its perturbed variants (`robustness:` node): the variants its kinds
make of the dataset's queries, and those of the perturbed sets it names, appended to the
queries, so one job retrieves originals and variants against one index."""

from __future__ import annotations

from dataclasses import replace

from retrieval_bench.config.robustness import RobustnessConfig
from retrieval_bench.errors import DataError
from retrieval_bench.paths import resolve_path
from retrieval_bench.perturb.base import PerturbSettings
from retrieval_bench.perturb.evalset import KindReport, kind_of, load_perturbed, perturb_queries
from retrieval_bench.perturb.kinds import build_kinds
from retrieval_bench.records import Dataset, Entity, EvalQuery


def settings_of(
    cfg: RobustnessConfig, entities: tuple[Entity, ...], source: str = "robustness"
) -> PerturbSettings:
    """The kinds' settings from a `robustness:` node and the dataset's lexicon (`source`:
    `robustness`, or `--` for run.perturb's flags, which refusals then name)."""
    return PerturbSettings(
        rate=cfg.rate,
        seed=cfg.seed,
        entities_too=cfg.entities == "too",
        truncate_chars=cfg.truncate_chars,
        opencc_traditional=cfg.opencc_traditional,
        opencc_simplified=cfg.opencc_simplified,
        entities=entities,
        source=source,
    )


def with_variants(dataset: Dataset, cfg: RobustnessConfig, source: str = "") -> Dataset:
    """`dataset` with the variants `cfg` asks for after its queries (unchanged when it asks
    none). A variant id already taken, or a variant whose original is not a query of the
    dataset, is refused (DataError naming the file; `source`: the evaluation set's)."""
    originals = {q.query_id: q for q in dataset.originals}
    given = [q for q in dataset.queries if q.perturbed_from is not None]
    for query in given:  # an evaluation set that holds variants itself
        if query.perturbed_from not in originals:
            raise DataError(
                source or "the evaluation set",
                f"query {query.query_id!r}: meta.perturbed_from names "
                f"{query.perturbed_from!r}, which is not a query of this job",
            )
    if not cfg.active:
        return dataset
    kinds = build_kinds(cfg.kinds, settings_of(cfg, dataset.entities), "robustness.kinds")
    made, reports = perturb_queries(list(originals.values()), kinds, cfg.seed)
    variants: list[EvalQuery] = [*given, *made]
    for path in cfg.sets:
        variants += load_perturbed(resolve_path(path), originals)
    seen = set(originals)
    for query in variants:
        if query.query_id in seen:
            where = ", ".join(cfg.sets) or "robustness.kinds"
            raise DataError(where, f"query id {query.query_id!r} is used twice in this job")
        seen.add(query.query_id)
    return replace(
        dataset,
        queries=(*originals.values(), *variants),
        perturbations=tuple(kind_summary(reports, variants, len(originals))),
    )


def kind_summary(
    reports: list[KindReport], variants: list[EvalQuery], originals: int
) -> list[dict[str, object]]:
    """Per kind (the job's own, then those only a perturbed set holds): its library, variants
    and the queries left out by reason (for a set's kind: those it holds no variant of)."""
    counts: dict[str, int] = {}
    for query in variants:
        counts[kind_of(query)] = counts.get(kind_of(query), 0) + 1
    out = [{**r.to_json(), "variants": counts.get(r.kind, 0)} for r in reports]
    made = {r.kind for r in reports}
    for kind in sorted(set(counts) - made):
        missing = originals - counts[kind]
        left = {"no variant in the perturbed set": missing} if missing > 0 else {}
        out.append(
            {"kind": kind, "library": "a perturbed set", "variants": counts[kind], "left_out": left}
        )
    return out
