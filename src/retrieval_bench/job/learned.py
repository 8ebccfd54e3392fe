"""`router=learned` in a job: every arm ranks every query (the features read every pool), each
candidate strategy is recorded beside the routed result (QueryRecord.baselines, with the rules
router's choice and plain RRF as comparisons), then each query's strategy is chosen from its
features (routing.features) by a learned router (routing.learned), and the job finishes it.

Learning (no `router.model`): the labelled queries' utilities (`router.metric` of every
candidate's ranking, scored as the job scores its stages) are the targets. Each of the
`router.ceiling_folds` folds (stratified by type, the routing ceiling's own folds) is routed by a
router selected and fitted on the other folds only, so the job's final stage is a held-out
estimate; then a router is selected and fitted on every labelled query, saved with the job
(router.json), and routes the queries without labels. Applying (`router.model=PATH`): the saved
router routes every query; its features, arms and candidates must be this job's.

A query with a feature that cannot be computed (an arm returned nothing) takes
`router.fallback`; it is counted and reported, and never trains a router.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from retrieval_bench.config import RunConfig
from retrieval_bench.errors import ConfigError
from retrieval_bench.job.build import build_combiners
from retrieval_bench.job.pipeline import BaselineStrategy, Searched, Selected
from retrieval_bench.paths import resolve_path
from retrieval_bench.progress import progress
from retrieval_bench.protocols import BuildContext, Combiner
from retrieval_bench.records import EvalQuery, ParsedQuery, QueryRecord, StageRecord
from retrieval_bench.retrievers.bm25 import jieba_tokens
from retrieval_bench.routing.candidates import HYBRID, RULES, check_learned, hybrid
from retrieval_bench.routing.ceiling import assign_folds
from retrieval_bench.routing.features import (
    DEFAULT_DEPTH,
    ArmPool,
    TermStatistics,
    feature_names,
    query_features,
    retrieval_features,
)
from retrieval_bench.routing.learned import (
    Candidate,
    RouterModel,
    as_matrix,
    cross_fit,
    finite_rows,
    fit_router,
    load_model,
)
from retrieval_bench.routing.learned_metrics import LearnedOutcome
from retrieval_bench.routing.router import RuleRouter
from retrieval_bench.routing.rules import LEARNED, Routing, RuleSet, Strategy
from retrieval_bench.scoring.aggregate import CodedLabels
from retrieval_bench.scoring.labels import Judgements
from retrieval_bench.scoring.measure_names import per_query_measure
from retrieval_bench.scoring.records import per_query_values

log = logging.getLogger(__name__)
# The inner cross-validation that selects a router inside its training queries.
INNER_FOLDS = 3


def learned_metric(cfg: RunConfig) -> tuple[str, int]:
    """(measure, cut-off) of `router.metric`: a per-query measure where higher is better (the
    router maximises it)."""
    name, k, higher = per_query_measure(
        cfg.router.metric, "router.metric", cfg.top_k, cfg.scoring.cutoffs
    )
    if not higher:
        raise ConfigError(
            "router.metric", f"{name}@{k} is lower-is-better; the router maximises its metric"
        )
    return name, k


def strategy_of(candidate: Candidate) -> Strategy:
    return Strategy(candidate.name, candidate.arms, candidate.combine, candidate.exclude)


def query_key(query: EvalQuery) -> str:
    """A query's identity across datasets, its id and its text hashed: whether a saved router
    was trained on a query (a BEIR set's ids "0", "1", ... recur in every other set, so an id
    alone would call another set's query seen)."""
    return hashlib.sha256(f"{query.query_id}\n{query.query}".encode()).hexdigest()[:16]


def queries_digest(qids: Sequence[str]) -> str:
    """A hash of a set of query ids (sorted), to tell whether a saved router saw a query."""
    digest = hashlib.sha256()
    for qid in sorted(qids):
        digest.update(qid.encode("utf-8") + b"\n")
    return digest.hexdigest()


class LearnedRouting:
    """The learned router of one job: its candidates, the comparisons recorded beside them,
    the combiners soft routing needs, the term statistics and the saved router if any."""

    def __init__(
        self, cfg: RunConfig, rule_set: RuleSet | None, arms: Sequence[str], ctx: BuildContext
    ) -> None:
        self.cfg = cfg
        self.settings = cfg.router
        self.rule_set = rule_set
        self.rules = RuleRouter(rule_set) if rule_set else None
        self.arms = list(arms)
        self.candidates = check_learned(cfg.router, rule_set, arms, cfg.retriever.arms)
        self.metric = learned_metric(cfg)
        self.routes = list(rule_set.routes) if rule_set else []
        self.features = feature_names(self.arms, self.routes)
        self.strategies = {c.name: strategy_of(c) for c in self.candidates}
        self.plain = strategy_of(hybrid(self.arms))
        fallback = self.strategies.get(cfg.router.fallback)
        self.fallback = fallback if fallback is not None else self.plain
        excludes = any(c.exclude for c in self.candidates) or bool(
            rule_set and any(r.strategy.exclude for r in rule_set.routes.values())
        )
        self.searching = Strategy(LEARNED, tuple(self.arms), "rrf", excludes)
        self.model = self._saved(cfg.router.model) if cfg.router.model else None
        if self.model is None and importlib.util.find_spec("sklearn") is None:
            raise ConfigError(
                "router",
                "router=learned fits its router with scikit-learn, which is not installed: "
                "pip install 'retrieval-bench[router]' (applying a saved router needs none)",
            )
        # The router that routes unseen queries: the saved one, or the one fitted here.
        self.fitted: RouterModel | None = self.model
        self.searched: dict[str, Searched] = {}
        self.ctx = ctx
        self._terms: tuple[Callable[[str], list[str]], TermStatistics, float] | None = None

    def prepare(self) -> tuple[Callable[[str], list[str]], TermStatistics, float]:
        """The job's tokenizer and the corpus's term statistics, from the token cache a BM25
        arm of the job has filled (built after the arms, so the first time only a job without
        one tokenises): (tokenize, statistics, seconds they took)."""
        if self._terms is None:
            start = time.perf_counter()
            tokenizer, tokens, _ = jieba_tokens(self.ctx, self.cfg.text)
            terms = TermStatistics.from_term_ids(tokens.vocab, tokens.ids, tokens.lengths)
            self._terms = (tokenizer.tokenize, terms, time.perf_counter() - start)
        return self._terms

    def _saved(self, given: str) -> RouterModel:
        """The saved router of `router.model`, checked against this job: the same features
        (hence arms and rule routes) and candidates, else ConfigError naming what differs."""
        path = Path(resolve_path(given))
        if not path.is_file():
            raise ConfigError("router.model", f"no such file: {path}")
        model = load_model(path)
        differs = []
        if list(model.arms) != self.arms:
            differs.append(f"arms {list(model.arms)} (this job: {self.arms})")
        if list(model.features) != self.features:
            missing = [f for f in model.features if f not in self.features]
            extra = [f for f in self.features if f not in model.features]
            differs.append(
                f"features: this job lacks {missing or 'none'} and adds {extra or 'none'}"
                if missing or extra
                else "features in another order"
            )
        names = [c.name for c in self.candidates]
        if list(model.candidates) != self.candidates:
            differs.append(
                f"candidates {[c.name for c in model.candidates]} (this job: {names}; "
                "a candidate's arms, combiner, exclusions or weights may differ too)"
            )
        if differs:
            raise ConfigError(
                "router.model",
                f"{path} was trained for another job: {'; '.join(differs)}. Give this job the "
                "saved router's arms, rules, router.mode and router.candidates, or train one "
                "for it (router=learned without router.model)",
            )
        return model

    # --- what the pipeline runs ---------------------------------------------------------------

    def presearch(self, query: EvalQuery, parsed: ParsedQuery) -> Routing:
        """Before the search: every arm ranks (the features read every pool), under the
        exclusions the parse found when a candidate may need them; the rules router's route
        and rule are kept (a feature, and what the learned choice is compared with)."""
        if self.rules is None:
            return Routing(None, self.searching)
        route, rule = self.rules.classify(parsed)
        return Routing(route, self.searching, rule)

    def baselines(self) -> dict[str, BaselineStrategy]:
        """Every candidate, plain RRF when it is not one, and the rules router's choice."""
        out: dict[str, BaselineStrategy] = dict(self.strategies)
        out.setdefault(HYBRID, self.plain)
        if self.rules is not None:
            rules = self.rules
            out[RULES] = lambda item: rules(item.query, item.parse).strategy
        return out

    def combiners(self, ctx: BuildContext) -> dict[str, Combiner]:
        """Soft routing's weighted RRF combiners, one per weight vector, by its combine name."""
        return {
            c.combine: build_combiners(self.cfg, ["rrf"], ctx, c.weights)["rrf"]
            for c in self.candidates
            if c.weights is not None
        }

    def strategy_names(self) -> dict[str, Strategy]:
        """Every strategy a record may name (the latency probe looks them up)."""
        return {**self.strategies, HYBRID: self.plain, self.fallback.name: self.fallback}

    # --- features and the choice ------------------------------------------------------------

    def time_query(self, record: QueryRecord) -> dict[str, float]:
        """One query's routing as a served router does it, timed for the latency probe:
        its features (`features_ms`) and the router's choice (`choose_ms`)."""
        item = self.searched[record.query.query_id]
        start = time.perf_counter()
        row = self.query_features(item)
        featured = time.perf_counter()
        if self.fitted is not None:
            x = as_matrix([row], self.features)
            if finite_rows(x).all():
                self.fitted.choose(x)
        return {
            "features_ms": 1000 * (featured - start),
            "choose_ms": 1000 * (time.perf_counter() - featured),
        }

    def query_features(self, item: Searched) -> dict[str, float | None]:
        """One query's features (routing.features) from its parse and the plain pools."""
        tokenize, terms, _ = self.prepare()
        tokens = tokenize(item.query.query)
        out = query_features(item.query.query, item.parse, tokens, item.routing.route, self.routes)
        out.update(terms.term_features(tokens))
        pools = {
            arm: ArmPool(ranked.indices, ranked.scores)
            for arm, ranked in item.baseline_pools.items()
        }
        out.update(retrieval_features(pools, self.arms, DEFAULT_DEPTH, len(tokens)))
        return {name: out[name] for name in self.features}

    def select(
        self,
        searched: Sequence[Searched],
        compared: Sequence[Mapping[str, StageRecord]],
        judgements: Judgements,
        labels: CodedLabels,
        doc_of: Mapping[str, str] | None,
        dataset: str,
    ) -> tuple[list[Selected], LearnedOutcome]:
        """Each query's routing (module docstring) and what was learned."""
        self.searched = {item.query.query_id: item for item in searched}
        self.prepare()
        start = time.perf_counter()
        rows = [
            self.query_features(item)
            for item in progress("router features", len(searched), "query", searched)
        ]
        features_s = time.perf_counter() - start
        x = as_matrix(rows, self.features)
        complete = finite_rows(x)
        qids = [item.query.query_id for item in searched]
        names = [c.name for c in self.candidates]
        outcome = LearnedOutcome(
            mode=self.settings.mode,
            metric=f"{self.metric[0]}@{self.metric[1]}",
            candidates=names,
            features=self.features,
            model=self.model,
            applied=str(resolve_path(self.settings.model)) if self.settings.model else None,
            fallback_strategy=self.fallback.name,
        )
        choice = np.full(len(qids), -1, dtype=np.int64)
        start, cpu = time.perf_counter(), time.process_time()
        if self.model is not None:
            choice[complete] = self.model.choose(x[complete])
            how = dict.fromkeys(qids, "saved router")
            outcome.seen = self._seen(judgements)
        else:
            how = self._learn(
                x, complete, qids, compared, judgements, labels, doc_of, dataset, choice, outcome
            )
        outcome.seconds = {
            "features": round(features_s, 4),
            "features_per_query_ms": round(1000 * features_s / max(len(qids), 1), 4),
            "term_statistics": round(self.prepare()[2], 4),
            "routing": round(time.perf_counter() - start, 4),
            # This process's CPU time (every thread's), which other work does not inflate.
            "routing_cpu": round(time.process_time() - cpu, 4),
        }
        selected = []
        for i, (item, row) in enumerate(zip(searched, rows, strict=True)):
            qid = qids[i]
            if self.rule_set is not None and item.routing.route is not None:
                outcome.rules[qid] = self.rule_set.routes[item.routing.route].strategy.name
            if complete[i]:
                strategy = self.strategies[names[choice[i]]]
                rule = f"learned: {how[qid]}"
            else:
                strategy = self.fallback
                missing = [n for n in self.features if row.get(n) is None]
                outcome.fallback[qid] = missing
                rule = f"fallback: no {missing[0]}" + (
                    f" (+{len(missing) - 1} more)" if len(missing) > 1 else ""
                )
                how[qid] = "fallback"
            outcome.chosen[qid] = strategy.name
            outcome.how[qid] = how[qid]
            selected.append(Selected(Routing(strategy.name, strategy, rule), row))
        if outcome.fallback:
            log.warning(
                "learned router: %d queries with features that could not be computed took "
                "the fallback strategy %s",
                len(outcome.fallback),
                self.fallback.name,
            )
        return selected, outcome

    def _seen(self, judgements: Judgements) -> int | None:
        """How many of this job's labelled queries the saved router was trained on, by id and
        text (query_key); None where it did not record them."""
        assert self.model is not None
        keys = self.model.trained_on.get("query_keys")
        if keys is None:
            return None
        trained = set(keys)
        labelled = [self.searched[q].query for q in judgements.qrels if q in self.searched]
        return sum(query_key(query) in trained for query in labelled)

    def _learn(
        self,
        x: np.ndarray,
        complete: np.ndarray,
        qids: Sequence[str],
        compared: Sequence[Mapping[str, StageRecord]],
        judgements: Judgements,
        labels: CodedLabels,
        doc_of: Mapping[str, str] | None,
        dataset: str,
        choice: np.ndarray,
        outcome: LearnedOutcome,
    ) -> dict[str, str]:
        """Cross-fit the labelled queries (held out by fold), fit the saved router on all of
        them, route the rest with it; `choice` filled in place, each query's `how` returned."""
        settings = self.settings
        position = {q: i for i, q in enumerate(qids)}
        scored = [q for q in judgements.qrels if q in position]
        if not scored:
            raise ConfigError(
                "router",
                f"router=learned has no labelled query of dataset '{dataset}' to learn from: "
                "label some queries, or apply a saved router with router.model=PATH",
            )
        types = {q: judgements.query_types[q] for q in scored}
        fold_of = assign_folds(types, settings.ceiling_folds, settings.ceiling_seed)
        train = [q for q in scored if complete[position[q]]]
        needed = settings.ceiling_folds * INNER_FOLDS
        if len(train) < needed:
            raise ConfigError(
                "router.ceiling_folds",
                f"router=learned needs at least {needed} labelled queries whose features "
                f"could be computed ({settings.ceiling_folds} folds, each trained with "
                f"{INNER_FOLDS} inner folds); dataset '{dataset}' has {len(train)} of "
                f"{len(scored)} labelled: label more queries or lower router.ceiling_folds",
            )
        rows = np.array([position[q] for q in train], dtype=np.int64)
        names = [c.name for c in self.candidates]
        utilities = np.column_stack(
            [
                per_query_values(
                    [compared[i][name] for i in rows],
                    train,
                    judgements,
                    labels,
                    self.metric,
                    doc_of,
                )
                for name in names
            ]
        )
        train_types = [types[q] for q in train]
        grid = {k: list(v) for k, v in settings.estimators.items()}
        log.info(
            "learning a router on %d labelled queries: %d folds, %d candidates, %d features",
            len(train),
            settings.ceiling_folds,
            len(names),
            len(self.features),
        )
        fold = np.array([fold_of[q] for q in train], dtype=np.int64)
        held = cross_fit(
            x[rows],
            utilities,
            train_types,
            fold,
            grid,
            settings.margins,
            INNER_FOLDS,
            settings.ceiling_seed,
        )
        choice[rows] = held.choices
        outcome.folds = [{**f, "reference": names[f["reference"]]} for f in held.folds]
        model = fit_router(
            x[rows],
            utilities,
            train_types,
            self.features,
            self.arms,
            self.candidates,
            grid,
            settings.margins,
            INNER_FOLDS,
            settings.ceiling_seed,
            outcome.metric,
            {
                "dataset": dataset,
                "queries": len(train),
                "query_ids": list(train),
                "query_ids_sha256": queries_digest(train),
                "query_keys": sorted(query_key(self.searched[q].query) for q in train),
                "types": dict(sorted(Counter(train_types).items())),
            },
        )
        outcome.model = model
        self.fitted = model
        how = {q: f"fold {fold_of[q]}" for q in train}
        rest = np.array([i for i, q in enumerate(qids) if q not in how and complete[i]])
        if len(rest):
            choice[rest] = model.choose(x[rest])
            how.update({qids[i]: "all labelled queries" for i in rest})
        return how
