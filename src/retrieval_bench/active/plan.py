"""A labelling plan: which queries people label, round by round, each with its inclusion
probability, written as pool files people fill in the usual way.

The design (what the estimates' unbiasedness rests on, `stats.active_ppi`): Poisson sampling
per round. Round t gives each query not labelled yet (`candidates`) an inclusion probability
pi_t,i from the strategy's weights (`strategies`), mixed with uniform by the plan's floor and
summing to the round's budget (`stats.sampling_design`); each candidate is then chosen
independently, query i when U_i < pi_t,i, with U the uniform draws of a generator seeded by
(seed, t), one per candidate in the population's order. The unit is the query: a chosen query's
every open pooled pair (top K of either job, no person's label yet) goes to people, because the
per-query metric needs all of them. Queries whose pairs people had all labelled before the plan
are known (pi = 1, no cost); so are, in later rounds, the queries earlier rounds chose.

The budget is split over the rounds when the plan is made (`first_share` to round 1, the rest
evenly). The rounds' estimates are combined with weights each later round sets when it is drawn,
before its labels come back: the inverse of each drawn round's variance for the paired
difference as the judge's calibration predicts it (`stats.active_ppi.planned_weights`; the
budget shares where no calibration exists yet), recorded with the round. With more than one
round, round 1 is a uniform pilot: what it returns calibrates the judge and fits the predictor,
and its own estimate (tuned on its labels, the classical regression estimate) is well behaved
however the later rounds are drawn. Round t + 1 is drawn (`python -m run.label next`) only after
every pair earlier rounds sent out has people's grade in the snapshot given, and it uses what
came back: the judge's calibration (`calibration`) on every pair people labelled that the judge
graded, and the coefficients of its estimate's predictor (lam, c per quantity), fitted on the
queries labelled so far and recorded with the round, so the round's estimate is exactly unbiased
given the earlier ones. A single-round plan uses the strategy at once (a calibration in the
snapshot, from `run.judge --calibrate` imported, makes `active` and `uncertainty` possible;
without one `active` falls back to `disagreement` and `uncertainty` to `uniform`), with its
coefficients tuned on its own labels.

Each round records, in `plan.json`: its candidates' probabilities, the chosen queries, the
prediction its estimate will use (each system's per-query value: the calibrated judge's
expectation, or the metric under the judge's grades, or none), and what it was drawn from. The
file carries the sha256 of every round's record, and reading it checks that hash and draws
each round's choice again from its seed and probabilities: a plan edited so that probabilities
no longer match what was drawn is refused (exit 2).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from retrieval_bench.active.calibration import cell_counts, cells, probabilities, score_ranks
from retrieval_bench.active.context import PlanContext, PlanError, find_jobs, load_context
from retrieval_bench.active.files import PLAN_JSON, ROUND_DIR
from retrieval_bench.active.prediction import disagreement, drawn_values, judged_values
from retrieval_bench.active.strategies import (
    ACTIVE,
    DISAGREEMENT,
    STRATEGIES,
    UNCERTAINTY,
    UNIFORM,
    WITHOUT_CALIBRATION,
    active_weights,
    round_design,
    uncertainty_weights,
)
from retrieval_bench.data.hashes import canonical_sha256
from retrieval_bench.data.judgments import PLAN_FIELDS
from retrieval_bench.errors import ConfigError
from retrieval_bench.io.atomic import atomic_write_json
from retrieval_bench.jobdir import names
from retrieval_bench.labels.pool import POOL_FIELDS, pool_records, write_pool_records
from retrieval_bench.stats.active_ppi import fitted_coefficients, planned_weights

VERSION = 1
# A calibration needs this many labelled pairs the judge graded, with both kinds among them.
MIN_CALIBRATION_PAIRS = 30
# Label draws behind the judge's expected metric and the predicted error.
MC_DRAWS = 64
# What a plan estimates besides each system's metric, and its two estimates.
DIFFERENCE = "difference"
PEOPLE, WITH_JUDGE = "people", "active"


@dataclass(frozen=True)
class PlanSettings:
    strategy: str = ACTIVE
    budget: int = 0
    rounds: int = 2
    first_share: float = 0.3
    floor: float = 0.2
    seed: int = 0
    unit: str = "query"

    def check(self, candidates: int) -> None:
        """ConfigError naming the flag of a bad setting."""
        if self.strategy not in STRATEGIES:
            raise ConfigError("--strategy", f"{self.strategy!r}: one of {', '.join(STRATEGIES)}")
        if self.unit != "query":
            raise ConfigError(
                "--unit",
                f"{self.unit!r}: a plan's unit is the query (all its pooled pairs): the "
                "per-query metrics need every pair of a query labelled",
            )
        if self.budget <= 0:
            raise ConfigError(
                "--budget", f"must be a positive number of queries, got {self.budget}"
            )
        if self.budget > candidates:
            raise ConfigError(
                "--budget",
                f"{self.budget} queries, but only {candidates} have open pooled pairs to label",
            )
        if self.rounds < 1:
            raise ConfigError("--rounds", f"must be >= 1, got {self.rounds}")
        if self.rounds > 1 and not 0 < self.first_share < 1:
            raise ConfigError(
                "--first-share",
                f"round 1's share must be within (0, 1) when rounds follow, got {self.first_share}",
            )
        if not 0 < self.floor <= 1:
            raise ConfigError("--floor", f"must be within (0, 1], got {self.floor}")

    def round_budgets(self) -> list[float]:
        if self.rounds == 1:
            return [float(self.budget)]
        first = self.first_share * self.budget
        rest = (self.budget - first) / (self.rounds - 1)
        return [first] + [rest] * (self.rounds - 1)


def _uniforms(seed: int, round_number: int, count: int) -> np.ndarray:
    return np.random.default_rng([seed, round_number]).random(count)


def _round_hash(record: dict[str, Any]) -> str:
    return canonical_sha256({k: v for k, v in record.items() if k != "sha256"})


def _calibration(ctx: PlanContext) -> tuple[np.ndarray, dict[str, Any]] | None:
    """Each pooled pair's calibrated probability of being relevant to people, from every pair
    people labelled that the judge graded (module docstring); None when there are too few."""
    judge = ctx.judge_grades()
    people = ctx.people_grades()
    known = ~np.isnan(judge) & ~np.isnan(people)
    relevant = (np.nan_to_num(people) > 0).astype(np.float64)
    if known.sum() < MIN_CALIBRATION_PAIRS or len(set(relevant[known].tolist())) < 2:
        return None
    score = np.nan_to_num(judge, nan=-1.0)
    pair_cell = cells(
        (np.nan_to_num(judge) > 0).astype(np.int64),
        score_ranks(ctx.compared.pair_query, score),
        ctx.compared.best_ranks(),
    )
    rel, pairs = cell_counts(pair_cell, relevant, known)
    p = probabilities(rel, pairs)[pair_cell]
    return p, {"pairs": int(known.sum()), "relevant": int(relevant[known].sum())}


def _judged_prediction(ctx: PlanContext) -> np.ndarray | None:
    """(S, N) the metric under the judge's grades where it graded (people's elsewhere), or
    None when the snapshot holds no judge grade of a pooled pair."""
    judge = ctx.judge_grades()
    if np.isnan(judge).all():
        return None
    people = ctx.people_grades()
    relevant = np.where(np.isnan(judge), np.nan_to_num(people) > 0, judge > 0)
    return judged_values(ctx.compared, ctx.metric, ctx.k, relevant.astype(np.float64), ctx.people())


def quantities(systems: Sequence[str], values: np.ndarray) -> dict[str, np.ndarray]:
    """What a plan estimates, from (S, N) per-query values: each system's, and the paired
    difference (first minus second)."""
    return {systems[0]: values[0], systems[1]: values[1], DIFFERENCE: values[0] - values[1]}


def draw_round(
    ctx: PlanContext,
    settings: PlanSettings,
    round_number: int,
    known: np.ndarray,
    budget: float,
    earlier: Sequence[dict[str, Any]],
) -> dict[str, Any]:
    """Round `round_number`'s record (module docstring): `known` marks the queries labelled
    already (before the plan, or chosen by an earlier round whose labels came back)."""
    n = ctx.compared.n
    candidates = ~known
    contrast = np.array([1.0, -1.0])
    calibrated = _calibration(ctx)
    pilot = round_number == 1 and settings.rounds > 1
    if pilot:
        used = UNIFORM
    elif calibrated is None:
        used = WITHOUT_CALIBRATION[settings.strategy]
    else:
        used = settings.strategy
    prediction: np.ndarray | None
    if calibrated is not None:
        pair_p, calibration = calibrated
        rng = np.random.default_rng([settings.seed, round_number, 1])
        drawn = drawn_values(ctx.compared, ctx.metric, ctx.k, pair_p, rng, MC_DRAWS, ctx.people())
        prediction = drawn.mean(axis=0)
    else:
        calibration = None
        prediction = _judged_prediction(ctx)
    people = quantities(ctx.systems, _people_values(ctx))
    predicted = quantities(ctx.systems, prediction) if prediction is not None else None
    # The predictor's coefficients by least squares on the queries known now (none: the judge's
    # expectation as it is), and the difference under labels drawn from the calibration: what
    # `active` weighs by and the rounds' weights are predicted from.
    lam, c = 1.0, 0.0
    diff_drawn = None
    if calibrated is not None and predicted is not None:
        if known.any():
            fit = fitted_coefficients(predicted[DIFFERENCE], people[DIFFERENCE], known)
            lam, c = float(fit[0]), float(fit[1])
        diff_drawn = np.einsum("s,msn->mn", contrast, drawn)
    if used == UNIFORM:
        weights = None
    elif used == DISAGREEMENT:
        weights = disagreement(ctx.compared, ctx.metric, ctx.k, contrast)
    elif used == UNCERTAINTY:
        weights = uncertainty_weights(ctx.compared.pair_query, pair_p, n)
    else:
        assert predicted is not None and diff_drawn is not None
        weights = active_weights(diff_drawn, lam, c, predicted[DIFFERENCE])
    pi, pi_design = round_design(weights, candidates, budget, settings.floor)
    # The rounds' weights in the estimate, set now, before this round's labels come back: the
    # inverse of each round's variance for the difference as the calibration predicts it
    # (stats.active_ppi.planned_weights); None (the budget shares) without a calibration.
    round_weights = None
    if round_number > 1 and diff_drawn is not None and predicted is not None:
        squared_error = ((diff_drawn - (lam * predicted[DIFFERENCE] + c)) ** 2).mean(axis=0)
        shares = settings.round_budgets()[:round_number]
        designs = [_design(ctx.compared.query_ids, r["pi"]) for r in earlier] + [pi]
        round_weights = planned_weights(squared_error, designs, shares)
    # Rounds after the first: each estimate's coefficients, fitted now on the queries known
    # before the round with the round's own design weights, so they are fixed before its labels
    # come back (stats.active_ppi.fitted_coefficients).
    coefficients: dict[str, dict[str, list[float]]] | None = None
    if round_number > 1:
        coefficients = {}
        zeros = np.zeros(n)
        for name, y in people.items():
            fit = fitted_coefficients(zeros, y, known, False, pi_design)
            coefficients[name] = {PEOPLE: [0.0, float(fit[1])]}
            if predicted is not None:
                fit = fitted_coefficients(predicted[name], y, known, True, pi_design)
                coefficients[name][WITH_JUDGE] = [float(fit[0]), float(fit[1])]
    rows = np.flatnonzero(candidates)
    chosen_rows = rows[_uniforms(settings.seed, round_number, len(rows)) < pi[rows]]
    qids = ctx.compared.query_ids
    record: dict[str, Any] = {
        "round": round_number,
        "budget": budget,
        "strategy_used": used,
        "drawn_on": {"labels": str(ctx.labels), "sha256": ctx.labels_sha256},
        "calibration": calibration,
        "coefficients": coefficients,
        "pi": {qids[i]: float(pi[i]) for i in rows.tolist()},
        "chosen": [qids[i] for i in chosen_rows.tolist()],
        "prediction": None
        if prediction is None
        else {s: prediction[i].tolist() for i, s in enumerate(ctx.systems)},
        "issued_after": [r["round"] for r in earlier],
        "weights": round_weights,
    }
    record["sha256"] = _round_hash(record)
    return record


def _design(queries: Sequence[str], pi: dict[str, float]) -> np.ndarray:
    """A drawn round's probabilities over the population, 1 where the query was not its
    candidate (known before it)."""
    return np.array([pi.get(q, 1.0) for q in queries])


def _people_values(ctx: PlanContext) -> np.ndarray:
    """(S, N) each system's metric under people's labels as they are now (meaningful on the
    queries whose pooled pairs people have all labelled)."""
    codes, grades = ctx.compared.label_layout(ctx.people())
    return ctx.compared.values(ctx.metric, ctx.k, codes, grades)


def round_pool(ctx: PlanContext, record: dict[str, Any]) -> list[dict[str, Any]]:
    """The round's pool file: every open pooled pair of each chosen query, as `run.pool`
    writes a pool (best rank first), with the plan's round and the query's probability."""
    open_pairs = ctx.open_pairs()
    index = {qid: i for i, qid in enumerate(ctx.compared.query_ids)}
    sources = [f"{label}:{ctx.stage}" for label in ctx.systems]
    out = []
    for qid in record["chosen"]:
        row = index[qid]
        found: dict[str, dict[str, int]] = {}
        for j in np.flatnonzero((ctx.compared.pair_query == row) & open_pairs).tolist():
            code = int(ctx.compared.pair_code[j])
            ranks = {
                source: int(np.flatnonzero(ctx.compared.rankings[s, row] == code)[0]) + 1
                for s, source in enumerate(sources)
                if (ctx.compared.rankings[s, row] == code).any()
            }
            found[ctx.compared.passage_ids[code]] = ranks
        for pool_record in pool_records(ctx.queries[row], found, ctx.passages):
            pool_record["plan_round"] = record["round"]
            pool_record["inclusion_probability"] = record["pi"][qid]
            out.append(pool_record)
    return out


def known_queries(ctx: PlanContext) -> np.ndarray:
    """Queries none of whose pooled pairs is open (people labelled them all)."""
    open_per_query = np.bincount(
        ctx.compared.pair_query, weights=ctx.open_pairs(), minlength=ctx.compared.n
    )
    return open_per_query == 0


def create_plan(
    dirs: Sequence[Path],
    labels: Path,
    stage: str,
    metric: str,
    settings: PlanSettings,
    out: Path,
) -> tuple[dict[str, Any], list[Path]]:
    """Draw round 1 of a new plan into `out` (plan.json and round-1's pool files)."""
    if (out / PLAN_JSON).exists():
        raise PlanError(
            f"{out / PLAN_JSON}: a plan is there already; draw its next round with "
            f"`python -m run.label next {out} --labels SNAPSHOT`, or pass another --out"
        )
    jobs = find_jobs(dirs)
    ctx = load_context(jobs, labels, stage, metric)
    certain = known_queries(ctx)
    settings.check(int((~certain).sum()))
    budgets = settings.round_budgets()
    plan: dict[str, Any] = {
        "format": "retrieval-bench label plan",
        "version": VERSION,
        "jobs": [{"label": job.label, "path": str(job.path)} for job in jobs],
        "stage": stage,
        "metric": f"{ctx.metric}@{ctx.k}",
        "depth": ctx.compared.depth,
        "labels": {"path": str(labels), "sha256": ctx.labels_sha256},
        "strategy": settings.strategy,
        "unit": settings.unit,
        "budget": settings.budget,
        "floor": settings.floor,
        "seed": settings.seed,
        "first_share": settings.first_share if settings.rounds > 1 else 1.0,
        "round_budgets": budgets,
        "weights": [b / settings.budget for b in budgets],
        "queries": list(ctx.compared.query_ids),
        "query_types": list(ctx.compared.query_types),
        "outside": ctx.outside,
        "certain": [q for q, c in zip(ctx.compared.query_ids, certain.tolist(), strict=True) if c],
        "open": _open_by_query(ctx),
        "rounds": [],
    }
    record = draw_round(ctx, settings, 1, certain, budgets[0], [])
    plan["rounds"].append(record)
    files = _write(plan, ctx, record, out)
    return plan, files


def _open_by_query(ctx: PlanContext) -> dict[str, list[str]]:
    open_pairs = ctx.open_pairs()
    out: dict[str, list[str]] = {}
    for j, (qid, pid) in enumerate(ctx.compared.pair_ids()):
        if open_pairs[j]:
            out.setdefault(qid, []).append(pid)
    return out


def _write(plan: dict[str, Any], ctx: PlanContext, record: dict[str, Any], out: Path) -> list[Path]:
    folder = out / ROUND_DIR.format(round=record["round"])
    files = write_pool_records(round_pool(ctx, record), folder, (*POOL_FIELDS, *PLAN_FIELDS))
    atomic_write_json(out / PLAN_JSON, plan)
    return [out / PLAN_JSON, *files]


def read_plan(folder: Path) -> dict[str, Any]:
    """plan.json of `folder`, checked (module docstring): PlanError naming what is wrong."""
    path = folder / PLAN_JSON if folder.is_dir() else folder
    try:
        plan = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PlanError(f"{path}: no plan there (python -m run.label plan writes one)") from None
    except (OSError, ValueError) as exc:
        raise PlanError(f"{path}: not a readable plan ({exc})") from None
    if not isinstance(plan, dict) or plan.get("version") != VERSION or not plan.get("rounds"):
        raise PlanError(f"{path}: not a label plan of version {VERSION}")
    for record in plan["rounds"]:
        number = record.get("round")
        if record.get("sha256") != _round_hash(record):
            raise PlanError(
                f"{path}: round {number} was edited after it was drawn (its sha256 no longer "
                "matches): its probabilities or chosen queries are not the design's; draw a new "
                "plan"
            )
        candidates = [q for q in plan["queries"] if q in record["pi"]]
        draws = _uniforms(int(plan["seed"]), int(number), len(candidates))
        chosen = [q for q, u in zip(candidates, draws.tolist(), strict=True) if u < record["pi"][q]]
        if chosen != record["chosen"]:
            raise PlanError(
                f"{path}: round {number}'s chosen queries are not what its seed and "
                "probabilities draw: the plan was edited; draw a new plan"
            )
    return plan


def check_pool_file(folder: Path, plan: dict[str, Any], record: dict[str, Any]) -> None:
    """A round's pool file, where it is still there, must carry the plan's probabilities."""
    path = folder / ROUND_DIR.format(round=record["round"]) / names.POOL_JSONL
    if not path.is_file():
        return
    for line, text in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not text.strip():
            continue
        row = json.loads(text)
        qid = row.get("query_id")
        if qid not in record["pi"] or qid not in record["chosen"]:
            raise PlanError(
                f"{path}:{line}: query {qid!r} is not one round {record['round']} chose"
            )
        given = row.get("inclusion_probability")
        if not isinstance(given, (int, float)) or not math.isclose(
            float(given), record["pi"][qid], rel_tol=1e-9
        ):
            raise PlanError(
                f"{path}:{line}: inclusion_probability {given!r} for query {qid!r}, but the plan "
                f"drew it with {record['pi'][qid]!r}: the file was edited"
            )


def require_labels_back(
    plan: dict[str, Any], ctx: PlanContext, rounds: Sequence[dict[str, Any]], why: str
) -> None:
    """PlanError (`why` says what waits) unless every pair `rounds` sent to people has people's
    grade in the context's labels."""
    people = {q.query_id: q.people_relevance for q in ctx.queries}
    missing: dict[str, list[str]] = {}
    for record in rounds:
        for qid in record["chosen"]:
            lacking = [pid for pid in plan["open"].get(qid, []) if pid not in people.get(qid, {})]
            if lacking:
                missing[qid] = lacking
    if missing:
        pairs = sum(len(v) for v in missing.values())
        example = next(iter(missing))
        raise PlanError(
            f"{ctx.labels}: {pairs} pairs of {len(missing)} queries the plan sent to people "
            f"have no people's grade yet (e.g. query {example!r}: {missing[example][:3]}); "
            f"import the filled pools first (python -m run.pool --import), then {why}"
        )


def plan_context(plan: dict[str, Any], labels: Path) -> PlanContext:
    """The plan's jobs and queries against `labels` (the snapshot with the labels that came
    back); PlanError when the queries or pooled pairs are no longer the plan's."""
    jobs = find_jobs([Path(j["path"]) for j in plan["jobs"]])
    by_label = {job.label: job for job in jobs}
    if set(by_label) != {j["label"] for j in plan["jobs"]}:
        raise PlanError(
            f"the plan's jobs are no longer labelled {[j['label'] for j in plan['jobs']]}"
        )
    jobs = [by_label[j["label"]] for j in plan["jobs"]]
    ctx = load_context(jobs, labels, plan["stage"], plan["metric"])
    if list(ctx.compared.query_ids) != plan["queries"]:
        lost = sorted(set(plan["queries"]) - set(ctx.compared.query_ids))[:3]
        raise PlanError(
            f"{labels}: the plan's queries are not all there as they were (reviewed, ranked, with "
            f"a relevant passage), e.g. {lost}: estimate against a snapshot of the plan's labels"
        )
    return ctx


def next_round(folder: Path, labels: Path) -> tuple[dict[str, Any], list[Path]]:
    """Draw the plan's next round after the previous ones' labels came back in `labels`."""
    plan = read_plan(folder)
    done = len(plan["rounds"])
    if done >= len(plan["round_budgets"]):
        raise PlanError(
            f"{folder}: all {done} planned rounds are drawn; estimate with "
            f"`python -m run.label estimate {folder} --labels SNAPSHOT`"
        )
    ctx = plan_context(plan, labels)
    require_labels_back(plan, ctx, plan["rounds"], "draw the next round")
    known = np.isin(
        np.asarray(ctx.compared.query_ids),
        plan["certain"] + [q for r in plan["rounds"] for q in r["chosen"]],
    )
    settings = PlanSettings(
        strategy=plan["strategy"],
        budget=plan["budget"],
        rounds=len(plan["round_budgets"]),
        first_share=plan["first_share"],
        floor=plan["floor"],
        seed=plan["seed"],
    )
    record = draw_round(ctx, settings, done + 1, known, plan["round_budgets"][done], plan["rounds"])
    plan["rounds"].append(record)
    return plan, _write(plan, ctx, record, folder)
