"""The metric registry: every measure a stage reports is declared here once, and every other
place that names metrics (scoring, metrics.json, results.csv, report.md, the comparison, the
gate, config validation) reads it from here.

A declaration (`Measure`) says what ir_measures' `Measure` objects say, and what this project
needs besides: its name (`metrics.json` reports it as `<name>@<K>`), its family, the function
that computes it, whether a higher value is better, its ir_measures spelling, whether it is
also reported on the condensed list, whether it is a pooled ratio (and of which columns), and
the value the ideal ranking reaches. The order of declaration is the order reports list them.

Families: `doc` measures are functions of a `metrics.RankedGrades` (where the labelled ids sit
in each ranking cut to K): the aggregation calls `fn` for every cut-off, and `readable` reports
each of them again against the labels the asking role may read (`readable_<name>`). The
measures of the other families (`leak`, `entities`, `negative_entities`, `evidence`) read
passage metadata and query fields: their module computes their per-query columns, and the
declaration here gives their name, direction and pooling. The `answer` family's measures are
scored on a generator's answers against the context it was given (retrieval_bench.answers):
they carry no cut-off and live in a job's `answers.json`, not its `metrics.json`; an external
judge's score `<name>` is the answer measure `judge_<name>`, declared by the answers file that
holds it (`is_answer_measure` knows the family by name, so nobody else has to).

A new measure from outside the package is one function and one call, in any importable
module::

    from retrieval_bench.scoring.registry import register_measure

    def reciprocal_rank_squared(rg):        # rg: metrics.RankedGrades, cut to K
        return metrics.mrr(rg) ** 2

    register_measure("rr2", reciprocal_rank_squared, description="mrr squared")

and `scoring.plugins=[that_module]` in a job's config (or `--plugin that_module` for
`run.compare`) imports the module, so `rr2@K` is scored, written to every output and accepted
by `compare.metrics` and the gate like a built-in. An installed package may offer the module
under a name (`retrieval_bench.measures` entry point, `entry_points`): `scoring.plugins=[name]`
loads it when no module of that name is importable.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from retrieval_bench import entry_points
from retrieval_bench.errors import ConfigError, nearest_hint

if TYPE_CHECKING:
    from retrieval_bench.scoring.metrics import RankedGrades

RankedMeasure = Callable[["RankedGrades"], np.ndarray]
IdealValue = Callable[[int, np.ndarray], np.ndarray]

DOC = "doc"
ANSWER = "answer"
# Measures of perturbed variants against their originals (scoring.robustness): per variant, in
# metrics.json's `robustness` section, with a cut-off (`stable@K`).
ROBUSTNESS = "robustness"
# Families whose measures are computed by their own module (scoring.families, answers); `readable`
# is derived from `doc` (every doc measure again, `readable_` prefixed), never declared.
FAMILIES = (DOC, "leak", "entities", "negative_entities", "evidence", ANSWER, ROBUSTNESS)
# An external judge's score `<name>` in an answers file is the answer measure `judge_<name>`.
JUDGE_PREFIX = "judge_"
READABLE_PREFIX = "readable_"
CONDENSED_SUFFIX = "_condensed"
_NAME = re.compile(r"[a-z][a-z0-9_]*")


@dataclass(frozen=True)
class Measure:
    """One declared measure. `pooled` names the (numerator, denominator) per-query columns
    summed over a group (`{k}` stands for the cut-off): a pooled measure has no per-query
    value. `ideal(k, n_relevant)` is the per-query value of the ideal ranking (default 1 for
    a higher-is-better measure, 0 otherwise); `headline` puts it in the terminal summary's
    table (report.md's stage tables show every doc measure)."""

    name: str
    fn: RankedMeasure | None = None
    family: str = DOC
    higher_is_better: bool = True
    ir_measures: str | None = None
    condensed: bool = False
    pooled: tuple[str, str] | None = None
    ideal: IdealValue | None = None
    headline: bool = False
    description: str = ""
    trec_eval: str | None = None
    """trec_eval's measure that gives the same per-query value (`K` the cut-off), when one does."""

    def ideal_value(self, k: int, n_relevant: np.ndarray) -> np.ndarray:
        g = np.asarray(n_relevant, dtype=np.float64)
        if self.ideal is not None:
            return self.ideal(k, g)
        return np.full_like(g, 1.0 if self.higher_is_better else 0.0)


_REGISTRY: dict[str, Measure] = {}


def register_measure(
    name: str | Measure,
    fn: RankedMeasure | None = None,
    *,
    higher_is_better: bool = True,
    ir_measures: str | None = None,
    condensed: bool = False,
    ideal: IdealValue | None = None,
    headline: bool = False,
    description: str = "",
) -> Measure:
    """Declare a `doc` measure: `fn(rg)` returns one value per query of a
    `metrics.RankedGrades` cut to K (NaN only for a query with no relevant id). Returns the
    declaration. ValueError for a malformed name or one already taken (a built-in, a derived
    `readable_`/`_condensed` name, an answer metric or an ir_measures spelling); declaring the
    same measure again (a module imported twice) is a no-op. Only `doc` measures can come from
    outside: the other families' columns are computed by their own modules."""
    if isinstance(name, Measure):
        measure = name
        if measure.family != DOC:
            raise ValueError(f"measure {measure.name!r}: only doc measures can be registered")
    else:
        if fn is None:
            raise ValueError(f"measure {name!r}: a function of RankedGrades is required")
        measure = Measure(
            name,
            fn,
            higher_is_better=higher_is_better,
            ir_measures=ir_measures,
            condensed=condensed,
            ideal=ideal,
            headline=headline,
            description=description,
        )
    return _add(measure)


def _add(measure: Measure) -> Measure:
    _check_new(measure)
    _REGISTRY.setdefault(measure.name, measure)
    return measure


def unregister_measure(name: str) -> None:
    """Remove a measure (tests that register one undo it with this)."""
    _REGISTRY.pop(name, None)


def _check_new(measure: Measure) -> None:
    name = measure.name
    if not _NAME.fullmatch(name):
        raise ValueError(f"measure name {name!r}: lower-case letters, digits and _ only")
    if measure.family not in FAMILIES:
        raise ValueError(f"measure {name!r}: family {measure.family!r} is not one of {FAMILIES}")
    if measure.family == DOC and (measure.fn is None) == (measure.pooled is None):
        raise ValueError(f"doc measure {name!r} needs a function or a pooled ratio (one)")
    if _REGISTRY.get(name) == measure:
        return
    derived = name.startswith(READABLE_PREFIX) or name.endswith(CONDENSED_SUFFIX)
    if name in _REGISTRY or derived or name in known_metrics() or is_answer_measure(name):
        raise ValueError(f"measure name {name!r} is taken (built in, derived or registered)")
    if measure.ir_measures is not None and measure.ir_measures in ir_measures_names():
        raise ValueError(f"ir_measures spelling {measure.ir_measures!r} is taken")


def measures(family: str | None = None) -> list[Measure]:
    """The declared measures (of one family), in report order."""
    return [m for m in _REGISTRY.values() if family is None or m.family == family]


def reported(family: str) -> list[str]:
    """The names (without `@K`) a family reports, in report order: every measure, then the
    condensed variants (`<name>_condensed`) of those declared `condensed`."""
    declared = measures(family)
    return [
        *(m.name for m in declared),
        *(m.name + CONDENSED_SUFFIX for m in declared if m.condensed),
    ]


def pooled_columns(family: str, ks: Sequence[int]) -> dict[str, tuple[str, str]]:
    """`{<name>@<k>: (numerator column, denominator column)}` of a family's pooled measures,
    the `pooled` argument of `aggregate.summarise`."""
    return {
        f"{m.name}@{k}": (m.pooled[0].format(k=k), m.pooled[1].format(k=k))
        for m in measures(family)
        if m.pooled is not None
        for k in ks
    }


def _by_reported_name() -> dict[str, Measure]:
    """Every name a stage can report (without `@K`) -> its declaration, in report order: the
    doc metrics, readable recall's `readable_` copies of them, then the other families' (the
    answer family is not a stage's: `answer_measures`)."""
    doc = [(n, _REGISTRY[n.removesuffix(CONDENSED_SUFFIX)]) for n in reported(DOC)]
    out = dict(doc)
    out.update((READABLE_PREFIX + name, measure) for name, measure in doc)
    for family in FAMILIES[1:]:
        if family not in (ANSWER, ROBUSTNESS):
            out.update((name, _REGISTRY[name]) for name in reported(family))
    return out


def answer_measures() -> list[str]:
    """The declared answer measures, in report order (judges' `judge_<name>` come with their
    answers file)."""
    return [m.name for m in measures(ANSWER)]


def is_answer_measure(spec: str) -> bool:
    """Whether `spec` names an answer measure (a declared one, or a judge's `judge_<name>`):
    scored on answers, read from answers.json, with no cut-off."""
    name = str(spec)
    return name in answer_measures() or (
        name.startswith(JUDGE_PREFIX) and name[len(JUDGE_PREFIX) :].isidentifier()
    )


def robustness_measures() -> list[str]:
    """The declared robustness measures (`stable`): scored per perturbed variant."""
    return [m.name for m in measures(ROBUSTNESS)]


def is_robustness_measure(spec: str) -> bool:
    """Whether `spec` (`stable@K`, `stable@10`) names a robustness measure: read from
    metrics.json's `robustness` section, one value per perturbed variant."""
    return str(spec).partition("@")[0] in robustness_measures()


def known_metrics() -> list[str]:
    """Every metric name (without `@K`) a stage can report, in report order."""
    return list(_by_reported_name())


def ir_measures_names() -> dict[str, str]:
    """ir_measures' spelling -> the project's name, for every measure that has one."""
    return {m.ir_measures: m.name for m in measures() if m.ir_measures is not None}


def find(metric: str) -> Measure:
    """The declaration behind a reported name, with or without its cut-off
    (`readable_ndcg_condensed@10` -> ndcg), an answer measure's included (a judge's score is
    declared on the fly); KeyError for a name no measure reports."""
    name = metric.partition("@")[0]
    if is_answer_measure(name):
        return _REGISTRY.get(name) or Measure(name, family=ANSWER, description="a judge's score")
    if is_robustness_measure(name):
        return _REGISTRY[name]
    return _by_reported_name()[name]


def lower_is_better(metric: str) -> bool:
    """Whether `metric` (e.g. `leak_any@10`) is better when smaller. KeyError for a name
    nothing declares (a typo must not pass for higher-is-better)."""
    return not find(metric).higher_is_better


def ideal_value(metric: str, k: int, n_relevant: np.ndarray) -> np.ndarray:
    """Per query, the value the ideal ranking (every relevant id first) reaches on `metric`
    at cut-off `k`: the bound a retriever is judged against (`recall_bound` for recall). A
    condensed variant has its plain metric's ideal: the ideal ranking is all judged."""
    return find(metric).ideal_value(k, n_relevant)


def load_plugins(modules: Iterable[str], key: str) -> None:
    """Import each module named (`scoring.plugins`): importing one registers its measures. A
    name that is no importable module is looked up among the installed measures plug-ins
    (`entry_points`, group `retrieval_bench.measures`). ConfigError naming `key[i]`, the module
    and the exception's message for a module that cannot be imported or raises while it is (the
    user's code, not a bug of this tool), or a name nothing offers (with the nearest one)."""
    for i, module in enumerate(modules):
        offered = entry_points.is_name(module) and module in entry_points.names("measures")
        if offered and not entry_points.importable(module):
            entry_points.load(f"{key}[{i}]", "measures", module)
            continue
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ConfigError(
                f"{key}[{i}]", f"cannot import {module!r}: {exc}{_not_installed(module)}"
            ) from exc
        except Exception as exc:
            raise ConfigError(
                f"{key}[{i}]", f"importing {module!r} raised {type(exc).__name__}: {exc}"
            ) from exc


def _not_installed(module: str) -> str:
    """What the installed measures plug-ins say of a name no module has."""
    if not entry_points.is_name(module):
        return ""
    known = entry_points.names("measures")
    hint = nearest_hint(module, known) if known else "none is installed"
    return f"; nor is it the name of an installed measures plug-in ({hint})"


# --- The built-in measures -------------------------------------------------------------------


def _declare_builtins() -> None:
    """Every built-in measure, in report order (definitions: the modules named)."""
    from retrieval_bench.scoring import metrics as m

    def per_relevant(k: int, g: np.ndarray) -> np.ndarray:
        return np.minimum(k, g) / g

    def per_k(k: int, g: np.ndarray) -> np.ndarray:
        return np.minimum(k, g) / k

    def all_within(k: int, g: np.ndarray) -> np.ndarray:
        return (g <= k).astype(np.float64)

    doc = [  # scoring.metrics
        Measure("recall", m.recall, ir_measures="R", trec_eval="recall_K", condensed=True,
                ideal=per_relevant, headline=True),
        Measure("recall_pooled", pooled=("hits@{k}", "n_relevant"), headline=True),
        Measure("recall_bound", m.recall_bound, ideal=per_relevant, headline=True),
        Measure("hit", m.hit, ir_measures="Success", trec_eval="success_K", condensed=True,
                headline=True),
        Measure("all_hit", m.all_hit, ideal=all_within, headline=True),
        Measure("mrr", m.mrr, ir_measures="RR", trec_eval="recip_rank (run cut to K)",
                condensed=True, headline=True),
        Measure("ndcg", m.ndcg, ir_measures="nDCG", trec_eval="ndcg_cut_K", condensed=True,
                headline=True),
        Measure("map", m.average_precision, ir_measures="AP", trec_eval="map_cut_K",
                ideal=per_relevant),
        Measure("precision", m.precision, ir_measures="P", trec_eval="P_K", ideal=per_k),
        Measure("judged", m.judged, ir_measures="Judged"),
    ]  # fmt: skip

    def lower(
        name: str, family: str, pooled: tuple[str, str] | None = None, description: str = ""
    ) -> Measure:
        return Measure(
            name, family=family, pooled=pooled, higher_is_better=False, description=description
        )

    families = [
        # scoring.permissions
        lower("leak", "leak", description="unreadable passages in the top K over K: what the "
              "asking role may not read (meta.acl), as precision counts hits"),
        lower("leak_pooled", "leak", ("leaked@{k}", "shown@{k}")),
        lower("leak_any", "leak", description="1 when any passage of the top K is one the "
              "asking role may not read, else 0"),
        # scoring.entities
        Measure("entity_recall", family="entities",
                description="expected entities (the readable ones) mentioned in the top K over "
                "the expected entities"),
        Measure("entity_recall_pooled", family="entities",
                pooled=("entities_found@{k}", "n_expected")),
        lower("unexpected_entity_rate", "entities",
              description="entities the top K mentions that the query does not expect, over the "
              "entities it mentions (0 when it mentions none)"),
        lower("unexpected_entity_rate_pooled", "entities",
              ("unexpected@{k}", "entities_shown@{k}")),
        lower("negative_entity_rate", "negative_entities",
              description="entities the query excludes that the top K still mentions, over the "
              "entities it excludes"),
        lower("negative_entity_rate_pooled", "negative_entities",
              ("negatives_shown@{k}", "n_negative")),
        lower("negative_any", "negative_entities",
              description="1 when any entity the query excludes appears in the top K, else 0"),
        # scoring.evidence
        Measure("evidence_chain", family="evidence",
                description="1 when every hop of the query's evidence chain has one of its "
                "passages in the top K, else 0"),
        Measure("hop_recall", family="evidence",
                description="hops of the evidence chain with a passage in the top K over the hops"),
        Measure("hop_recall_pooled", family="evidence", pooled=("hops_found@{k}", "n_hops")),
        Measure("evidence_all", family="evidence",
                description="1 when every evidence passage of every hop is in the top K, else 0"),
        Measure("evidence_any", family="evidence",
                description="1 when any evidence passage is in the top K, else 0"),
        # retrieval_bench.answers: per query, on the context the generator was given
        Measure("source_coverage", family=ANSWER,
                description="labelled-relevant passages cited / labelled-relevant passages"),
        Measure("citation_precision", family=ANSWER,
                description="cited passages labelled relevant / cited passages"),
        Measure("citation_validity", family=ANSWER,
                description="citations pointing into the context the answer was given / "
                "citations"),
        Measure("refusal_correct", family=ANSWER,
                description="1 when it refused a query it should refuse or answered one it "
                "should answer, else 0"),
        # scoring.robustness: per perturbed variant, against its original
        Measure("stable", family=ROBUSTNESS,
                description="1 when the variant's hit@K equals its original's, else 0"),
    ]  # fmt: skip
    for measure in [*doc, *families]:
        _add(measure)


_declare_builtins()
