"""Each query through parse -> route -> filter -> arms -> combine -> the later stages in the
order they run (job.build.stage_specs: those before the top_k cut, the cut `final`, those after
it), every stage
recorded under its own name (each arm's, `fused`, then each later stage's). What every arm,
combiner and stage returns is checked against the stage contract (job.contract) before
anything else reads it."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from retrieval_bench.job.contract import StageContract, applies_own_acl
from retrieval_bench.job.filters import PassageFilter
from retrieval_bench.job.timing import PluginTiming
from retrieval_bench.plugins import guarded_call
from retrieval_bench.protocols import Arm, Combiner, Stage
from retrieval_bench.records import (
    FILTERED_OUT,
    NO_CANDIDATES,
    EvalQuery,
    FilterDecision,
    ParsedQuery,
    Passage,
    QueryRecord,
    Ranked,
    StageRecord,
)
from retrieval_bench.routing.router import Router
from retrieval_bench.routing.rules import Routing, Strategy
from retrieval_bench.stages.cut import TopKCutStage, cut
from retrieval_bench.tiebreak import shared_tie_break

# A query's type for `retriever.type_weights`, from the query and its route (None: no router).
TypeOf = Callable[[EvalQuery, str | None], str | None]


@dataclass(frozen=True)
class Searched:
    """One query up to its arms' pools (`Pipeline.search`): its parse, route, filter decision,
    the pools of the arms it asked for, and those its baselines combine (the same pools, unless
    the routed filter applied exclusions: then pools ranked without them, under
    `baseline_mask`)."""

    query: EvalQuery
    parse: ParsedQuery
    routing: Routing
    decision: FilterDecision
    pools: dict[str, Ranked]
    baseline_pools: dict[str, Ranked]
    baseline_mask: np.ndarray | None
    # Each arm's pool as recorded (`pools`'), made once however often the query is finished.
    arm_records: dict[str, StageRecord]


# A system recorded beside the routed one (QueryRecord.baselines): one strategy for every
# query, or one chosen per query from its search (the rules router's choice beside a learned
# router), which may use only the arms the query's routed strategy asked for.
BaselineStrategy = Strategy | Callable[[Searched], Strategy]


@dataclass(frozen=True)
class Selected:
    """A choice made after the search (a learned router): the query's routing, and the
    features it was chosen from (QueryRecord.features)."""

    routing: Routing
    features: dict[str, float | None] | None = None


class Pipeline:
    def __init__(
        self,
        passages: Sequence[Passage],
        arms: Mapping[str, Arm],
        parse: Callable[[str], ParsedQuery],
        passage_filter: PassageFilter,
        route: Router,
        pool_size: int,
        top_k: int,
        combiners: Mapping[str, Combiner],
        baselines: Mapping[str, BaselineStrategy] | None = None,
        stages: Sequence[tuple[str, Stage]] | None = None,
        typed_combiners: Mapping[str, Mapping[str, Combiner]] | None = None,
        type_of: TypeOf | None = None,
        before_cut: Collection[str] = (),
    ) -> None:
        """`combiners`: each combine name a strategy may use -> its combiner. `stages`: the
        later stages in order, by name (job.build checks their placement around the cut);
        default: the cut to `top_k` alone, `final`. `typed_combiners`: a query type's own
        combiners (`retriever.type_weights`), used for the queries `type_of` (query, route)
        gives that type; the baselines always use `combiners`. `before_cut`: the names of the
        stages placed before the top_k cut, which re-order or select from what they are given
        and never return more (the contract refuses it)."""
        self.ids = [p.id for p in passages]
        self.arms = arms
        self.parse = parse
        self.passage_filter = passage_filter
        self.route = route
        self.pool_size = pool_size
        self.top_k = top_k
        self.combiners = combiners
        self.typed_combiners = dict(typed_combiners or {})
        self.type_of = type_of
        self.baselines = dict(baselines or {})
        self.stages = list(stages) if stages is not None else [("final", TopKCutStage(top_k))]
        self.before_cut = frozenset(before_cut)
        self.tie_break = shared_tie_break(self.ids)
        self.contract = StageContract(self.ids, self.tie_break)
        # Wall time of each plug-in's calls, by kind and name (job.cost reads it).
        self.timing = PluginTiming()

    def run(self, queries: Sequence[EvalQuery]) -> list[QueryRecord]:
        return self.finish(self.search(queries))

    def search(self, queries: Sequence[EvalQuery]) -> list[Searched]:
        """Each query parsed, routed, filtered and ranked by the arms it needs: everything
        before combining, which depends on no fusion or later-stage setting (a tuning replay
        keeps it and finishes it under other settings)."""
        parsed = [self.parse(q.query) for q in queries]
        routed = [self.route(q, p) for q, p in zip(queries, parsed, strict=True)]
        decisions = [
            self.passage_filter.decide(
                p.cities, q.user_role, p.excluded_entities if r.strategy.exclude else ()
            )
            for q, p, r in zip(queries, parsed, routed, strict=True)
        ]
        wanted = [set(r.strategy.arms) for r in routed]
        masks = [d.mask for d in decisions]
        baseline_arms = {
            arm for s in self.baselines.values() if isinstance(s, Strategy) for arm in s.arms
        }
        # Baselines share the routed pools when the routed filter excluded nothing; otherwise
        # they rank again under the filter a router-less job would have used. Both kinds of
        # request go to each arm in one batch, so a query is encoded once per job.
        plain: list[int] = []
        if baseline_arms:
            for i, (query, parse, decision) in enumerate(
                zip(queries, parsed, decisions, strict=True)
            ):
                if "exclusions" in decision.applied:
                    plain.append(i)
                    masks.append(self.passage_filter.decide(parse.cities, query.user_role, ()).mask)
                    wanted.append(baseline_arms)
                else:
                    wanted[i] |= baseline_arms
        searched = self._search([*queries, *(queries[i] for i in plain)], masks, wanted)
        plain_at = {i: len(queries) + n for n, i in enumerate(plain)}
        return [
            Searched(
                query,
                parse,
                routing,
                decision,
                searched[i],
                searched[plain_at.get(i, i)],
                masks[plain_at.get(i, i)],
                {name: self._stage(pool) for name, pool in searched[i].items()},
            )
            for i, (query, parse, routing, decision) in enumerate(
                zip(queries, parsed, routed, decisions, strict=True)
            )
        ]

    def finish(
        self,
        searched: Sequence[Searched],
        compared: Sequence[dict[str, StageRecord]] | None = None,
        selected: Sequence[Selected] | None = None,
    ) -> list[QueryRecord]:
        """The searched queries combined (each by its strategy's combiner, or its type's),
        through the later stages, every stage recorded, and the baselines beside them.
        `compared`: the baselines already computed (`compare`) for `searched`; `selected`: each
        query's routing chosen after its search (`rerouted`), with its features."""
        if compared is None:
            compared = self.compare(searched)
        features: Sequence[dict[str, float | None] | None] = [None] * len(searched)
        if selected is not None:
            searched = [
                self.rerouted(i, s.routing) for i, s in zip(searched, selected, strict=True)
            ]
            features = [s.features for s in selected]
        queries = [s.query for s in searched]
        masks = [s.decision.mask for s in searched]
        ranked = self._combine_all(searched)
        stages: list[dict[str, StageRecord]] = []
        for item, combined in zip(searched, ranked, strict=True):
            strategy = item.routing.strategy
            recorded = {name: item.arm_records[name] for name in strategy.arms}
            if len(strategy.arms) > 1:
                recorded["fused"] = self._stage(combined)
            stages.append(recorded)
        for name, stage in self.stages:
            given = ranked
            start = time.perf_counter()
            applied = guarded_call(f"stage '{name}'", stage, stage.apply, queries, given)
            self.timing.add("stages", name, len(queries), start)
            ranked = self.contract.check(
                f"stage '{name}'",
                queries,
                applied,
                None,
                masks,
                [r.indices for r in given],
            )
            if name in self.before_cut:
                self.contract.check_not_grown(f"stage '{name}'", queries, ranked, given)
            for recorded, result in zip(stages, ranked, strict=True):
                recorded[name] = self._stage(result)
        return [
            QueryRecord(
                item.query,
                item.routing.route,
                item.routing.strategy.name,
                item.parse,
                item.decision,
                recorded,
                rule=item.routing.rule,
                baselines=baselines,
                features=query_features,
            )
            for item, recorded, baselines, query_features in zip(
                searched, stages, compared, features, strict=True
            )
        ]

    def compare(self, searched: Sequence[Searched]) -> list[dict[str, StageRecord]]:
        """Each query's baselines, cut to top_k: a strategy that excludes ranks the routed
        pools under the routed filter, any other the baseline pools under the filter a
        router-less job would have used."""
        out = []
        for item in searched:
            records = {}
            for name, spec in self.baselines.items():
                strategy = spec if isinstance(spec, Strategy) else spec(item)
                pools, mask = (
                    (item.pools, item.decision.mask)
                    if strategy.exclude
                    else (item.baseline_pools, item.baseline_mask)
                )
                combined = self._combine(item.query, strategy, [pools[a] for a in strategy.arms],
                                         mask)  # fmt: skip
                records[name] = self._stage(cut(combined, self.top_k))
            out.append(records)
        return out

    def rerouted(self, item: Searched, routing: Routing) -> Searched:
        """`item` answered by `routing` (chosen after the search): a strategy that excludes
        keeps the routed pools and filter decision, any other takes the baseline pools and the
        decision a router-less job would have made."""
        if routing.strategy.exclude or item.baseline_pools is item.pools:
            return replace(item, routing=routing)
        decision = self.passage_filter.decide(item.parse.cities, item.query.user_role, ())
        return replace(
            item,
            routing=routing,
            decision=decision,
            pools=item.baseline_pools,
            arm_records={name: self._stage(p) for name, p in item.baseline_pools.items()},
        )

    def _search(
        self,
        queries: Sequence[EvalQuery],
        masks: Sequence[np.ndarray | None],
        wanted: Sequence[set[str]],
    ) -> list[dict[str, Ranked]]:
        """Each arm ranks, in one batch, every query that wants it."""
        pools: list[dict[str, Ranked]] = [{} for _ in queries]
        for arm_name, arm in self.arms.items():
            members = [i for i, arms in enumerate(wanted) if arm_name in arms]
            if not members:
                continue
            asked = [queries[i] for i in members]
            allowed = [masks[i] for i in members]
            what = f"arm '{arm_name}'"
            start = time.perf_counter()
            answered = guarded_call(what, arm, arm.search, asked, self.pool_size, allowed)
            self.timing.add("arms", arm_name, len(asked), start)
            ranked = self.contract.check(
                what,
                asked,
                answered,
                self.pool_size,
                None if applies_own_acl(arm) else allowed,
            )
            for i, result in zip(members, ranked, strict=True):
                if not result.returned and result.empty_reason is None:
                    mask = masks[i]
                    reason = FILTERED_OUT if mask is not None and not mask.any() else NO_CANDIDATES
                    result = replace(result, empty_reason=reason)
                pools[i][arm_name] = result
        return pools

    def _combine_all(self, searched: Sequence[Searched]) -> list[Ranked]:
        """Each query's pools by its strategy's combiner (its type's, with type weights), the
        outputs of one combiner checked together (`_combine` does one query alike)."""
        raw: list[Ranked] = []
        given: list[np.ndarray] = []
        by_combine: dict[str, list[int]] = {}
        for i, item in enumerate(searched):
            strategy = item.routing.strategy
            typed = self.type_of(item.query, item.routing.route) if self.type_of else None
            combiners = self.typed_combiners.get(typed, self.combiners) if typed else self.combiners
            combiner = combiners[strategy.combine]
            pools = [item.pools[n] for n in strategy.arms]
            what = f"combiner '{strategy.combine}'"
            start = time.perf_counter()
            raw.append(guarded_call(what, combiner, combiner.combine, pools, self.tie_break))
            self.timing.add("combiners", strategy.combine, 1, start)
            given.append(np.concatenate([pool.indices for pool in pools]))
            by_combine.setdefault(strategy.combine, []).append(i)
        out = list(raw)
        for name, members in by_combine.items():
            checked = self.contract.check(
                f"combiner '{name}'",
                [searched[i].query for i in members],
                [raw[i] for i in members],
                None,
                [searched[i].decision.mask for i in members],
                [given[i] for i in members],
            )
            for i, result in zip(members, checked, strict=True):
                out[i] = result
        return out

    def _combine(
        self,
        query: EvalQuery,
        strategy: Strategy,
        pools: list[Ranked],
        mask: np.ndarray | None,
        combiners: Mapping[str, Combiner] | None = None,
    ) -> Ranked:
        """The strategy's combiner (of `combiners`, default the job's) over `pools` (a lone
        pool passes through, and pools all empty say why: fusion.pools), its output checked: a
        combiner may reorder and drop what the arms returned, never bring in a passage the
        filter excludes."""
        combiner = (combiners or self.combiners)[strategy.combine]
        what = f"combiner '{strategy.combine}'"
        start = time.perf_counter()
        combined = guarded_call(what, combiner, combiner.combine, pools, self.tie_break)
        self.timing.add("combiners", strategy.combine, 1, start)
        given = np.concatenate([pool.indices for pool in pools])
        return self.contract.check(what, [query], [combined], None, [mask], [given])[0]

    def _stage(self, ranked: Ranked) -> StageRecord:
        return StageRecord(
            ids=list(map(self.ids.__getitem__, ranked.indices.tolist())),
            scores=np.asarray(ranked.scores, dtype=np.float64).tolist(),
            pool_requested=ranked.requested,
            pool_returned=ranked.returned,
            indices=ranked.indices,
            empty_reason=ranked.empty_reason if not ranked.returned else None,
        )
