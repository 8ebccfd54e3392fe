"""One tuning, end to end: compose the job, build the search space, run Optuna's studies (all
queries, then each fold on the others) over replayed trials, score each fold's choice on its
held-out queries and the baseline on every query, and write tune.json, tune.md and tuned.yaml.

The studies live in the folder's SQLite file, so the same command with the same `tune.dir`
resumes a run that was stopped; everything after the studies is recomputed from them (cheap:
the pools are computed once)."""

from __future__ import annotations

import datetime
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import optuna
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from retrieval_bench.compare.build import significance_settings
from retrieval_bench.config import RunConfig
from retrieval_bench.config.compose import CONF_DIR, compose_dict, typed_config
from retrieval_bench.config.renamed import announce, rename_keys, rewrite_overrides
from retrieval_bench.errors import ConfigError, nearest_hint
from retrieval_bench.fusion import TYPE_FROM_LABEL
from retrieval_bench.io.atomic import atomic_write_json, atomic_write_text
from retrieval_bench.io.claims import claim_new_dir
from retrieval_bench.io.folders import check_output_dir, writable_dir
from retrieval_bench.io.locks import file_lock
from retrieval_bench.job.check import check_config
from retrieval_bench.paths import resolve_output
from retrieval_bench.progress import progress
from retrieval_bench.routing.ceiling import assign_folds
from retrieval_bench.routing.rules import LEARNED
from retrieval_bench.scoring.measure_names import per_query_measure
from retrieval_bench.tune.configs import TrialConfigs
from retrieval_bench.tune.estimate import (
    DEFINITIONS,
    baseline_comparison,
    by_type,
    gap,
    mean,
    type_table,
)
from retrieval_bench.tune.names import LOCK, STUDY_DB, TUNE_JSON, TUNE_MD, TUNED_YAML
from retrieval_bench.tune.replay import Replay
from retrieval_bench.tune.report import tune_markdown
from retrieval_bench.tune.space import (
    TYPE_WEIGHTS,
    WEIGHTS,
    SearchSpace,
    build_space,
    key_of,
    override_string,
    parse_sweep,
    shrink_type_weights,
)
from retrieval_bench.tune.study import (
    ALL_QUERIES,
    SAMPLER_SEED_RULE,
    Study,
    best_trial,
    finished,
    fold_study,
    make_sampler,
    open_study,
    quiet_optuna,
    run_trials,
    sampler_seeds,
    sqlite_storage,
    storage_url,
    study_file_faults,
    trial_counts,
)
from retrieval_bench.tune.tuned import job_overrides, tuned_document, write_tuned

log = logging.getLogger(__name__)
TYPE_ORACLE = (
    "label: each query's labelled type picks its weights, which no deployed system knows "
    "(an oracle study: an upper bound on what per-type weights can give)"
)
TYPE_ROUTE = "route: the rules router's route picks the weights, as a deployed system can"


@dataclass
class TuneRequest:
    """What the command asked: the job's overrides (sweeps among them are search dimensions)
    and an optional primary config folder (`--config-dir`)."""

    overrides: list[str]
    config_dir: Path | None = None


@dataclass
class Tuning:
    """A finished tuning: its folder and tune.json's content."""

    folder: Path
    summary: dict[str, Any]
    markdown: str = ""
    files: list[Path] = field(default_factory=list)


def split_overrides(overrides: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """(job overrides, search dimensions): an override whose value is a Hydra sweep
    (`combiners.rrf.k=range(10,101)`) is a dimension, every other one configures the job."""
    job: list[str] = []
    space: dict[str, str] = {}
    parser = OverridesParser.create()
    for text in overrides:
        override = parser.parse_override(text)
        if override.is_sweep_override():
            space[override.key_or_group.lstrip("+")] = text.split("=", 1)[1]
        else:
            job.append(text)
    return job, space


def resolve_metric(cfg: RunConfig) -> tuple[str, int, bool]:
    """(measure name, cut-off, higher is better) of `tune.metric`: a doc measure with a value
    per query, at a cut-off the job scores (top_k or one of scoring.cutoffs)."""
    return per_query_measure(cfg.tune.metric, "tune.metric", cfg.top_k, cfg.scoring.cutoffs)


def baseline_values(cfg: RunConfig, space: SearchSpace, base: Any) -> dict[str, Any]:
    """`tune.baseline` as searched key -> value; a key that is not searched is refused naming
    it (a key of the job: "not searched"; no key of the job: the nearest searched one)."""
    given = cfg.tune.baseline
    if given is None or given == "":
        return {}
    if isinstance(given, Mapping):
        pairs = {str(k): v for k, v in given.items()}
    else:
        pairs = {}
        for part in filter(None, (p.strip() for p in str(given).split(","))):
            key, sep, _text = part.partition("=")
            if not sep:
                raise ConfigError("tune.baseline", f"{given!r}: expected KEY=VALUE[,KEY=VALUE]")
            pairs[key.strip()] = OverridesParser.create().parse_override(part).value()
    renamed, notices = rename_keys(pairs, "tune.baseline")
    announce(notices)
    pairs = {renamed.get(key, key): value for key, value in pairs.items()}
    for key in pairs:
        if key in space.keys:
            continue
        if OmegaConf.select(base, key, default=None) is not None or key in base:
            raise ConfigError(
                f"tune.baseline.{key}",
                f"is not searched (searched: {', '.join(space.keys)}): the baseline is a point "
                "of the search space; search the key too, or set it for every trial as a job "
                "override",
            )
        raise ConfigError(
            f"tune.baseline.{key}", f"is no key of the job; {nearest_hint(key, space.keys)}"
        )
    return pairs


class Tuner:
    """The state of one tuning run (see the module docstring)."""

    def __init__(self, request: TuneRequest) -> None:
        overrides, notices = rewrite_overrides(request.overrides)
        announce(notices)
        job, cli_space = split_overrides(overrides)
        self.request = request
        self.job_overrides = job
        self.base = compose_dict(job, request.config_dir)
        self.cfg = typed_config(self.base)
        check_config(self.cfg)
        if self.cfg.router.name == LEARNED:
            raise ConfigError(
                "router",
                "run.tune replays a job's fusion and routing settings; router=learned chooses "
                "its own settings inside its training folds: run it as a job (python -m run "
                "router=learned), whose report holds its held-out estimate",
            )
        self.metric_name, self.k, self.higher = resolve_metric(self.cfg)
        renamed, notices = rename_keys(self.cfg.tune.space, "tune.space")
        announce(notices)
        space = {renamed.get(key, key): spec for key, spec in self.cfg.tune.space.items()}
        specs = {**space, **cli_space}
        for key, spec in specs.items():
            parse_sweep(key, spec)
        self.specs = specs
        self.replay = Replay(self.cfg)
        self.ids = self.replay.scored_ids
        self.types = {q: self.replay.type_of(q) for q in self.ids}
        self.arms = list(self.cfg.retriever.arms)
        self.space = build_space(specs, self.base, self.arms, self._type_keys(specs))
        self.configs = TrialConfigs(self.base, self.space.keys)
        self.conf_dirs = [CONF_DIR, *([request.config_dir] if request.config_dir else [])]
        self.fold_of = self._folds()
        self._check_bounds()

    # --- set-up checks ---------------------------------------------------------------------

    def _type_keys(self, specs: Mapping[str, str]) -> list[str]:
        """What `retriever.type_weights` gets a vector for: the scored queries' labelled types
        (label) or the rules router's routes (route)."""
        if TYPE_WEIGHTS not in specs:
            return []
        if self.cfg.retriever.type_weights_from == TYPE_FROM_LABEL:
            return sorted(set(self.types.values()))
        rule_set = self.replay.rule_set(self.cfg)
        if rule_set is None:
            raise ConfigError(
                f"tune.space.{TYPE_WEIGHTS}",
                "per-type weights by route need the rules router (router=rules); or set "
                "retriever.type_weights_from=label for an oracle study by labelled type",
            )
        return list(rule_set.routes)

    def _folds(self) -> dict[str, int]:
        """Each scored query's fold, stratified by type; refused when a type has fewer scored
        queries than folds (a fold would hold none of it) or nothing is scored."""
        k = self.cfg.tune.folds
        if not self.ids:
            raise ConfigError(
                "tune.folds", "no query of the evaluation set is scored: no fold can hold one"
            )
        counts = Counter(self.types.values())
        qtype, smallest = min(counts.items(), key=lambda item: (item[1], item[0]))
        if smallest < k:
            raise ConfigError(
                "tune.folds",
                f"{k} folds, but query type '{qtype}' has only {smallest} scored queries: each "
                f"fold must hold queries of every type; set tune.folds<={smallest}",
            )
        return assign_folds(self.types, k, self.cfg.tune.seed)

    def _check_bounds(self) -> None:
        """Each dimension at the ends of its range (the others at the job's values) must be a
        configuration the job accepts, so a bad range fails now, naming its key."""
        for dimension in self.space.dimensions:
            for value in _probe_values(dimension.key, dimension.params[0].distribution,
                                       len(self.arms)):  # fmt: skip
                if dimension.key == TYPE_WEIGHTS:
                    keys = self._type_keys(self.specs)
                    value = {t: value for t in keys}
                try:
                    check_config(self.configs.make({dimension.key: value}))
                except ConfigError as exc:
                    raise ConfigError(
                        f"tune.space.{dimension.key}",
                        f"{dimension.spec} reaches {value!r}, which the job refuses: {exc}",
                    ) from exc

    # --- trials ----------------------------------------------------------------------------

    def trial(
        self, params: Mapping[str, Any], train: Sequence[str]
    ) -> tuple[dict[str, Any], list[str], RunConfig]:
        """A trial's job values (type weights shrunk with the training queries' counts), its
        override strings and its config."""
        values = {d.key: d.raw(params) for d in self.space.dimensions}
        if TYPE_WEIGHTS in values:
            raw = values.pop(TYPE_WEIGHTS)
            plain = self.configs.make(values)
            overall = plain.retriever.weights or [1.0] * len(self.arms)
            if plain.retriever.type_weights_from == TYPE_FROM_LABEL:
                counts = Counter(self.types[q] for q in train)
            else:
                counts = Counter(r for r in self.replay.routes(plain, train).values() if r)
            values[TYPE_WEIGHTS] = shrink_type_weights(
                raw, overall, counts, self.cfg.tune.shrinkage
            )
        return values, self.overrides(values), self.configs.make(values)

    def overrides(self, values: Mapping[str, Any]) -> list[str]:
        """Override strings of job values; a key the composed job lacks (a plug-in node's
        keyword argument) is appended, `+key=value`, as Hydra requires."""
        flat: dict[str, Any] = {}
        for key, value in values.items():
            if key == TYPE_WEIGHTS:  # one override per type: Hydra adds a key to a dict so
                flat.update((f"{key}.{t}", v) for t, v in value.items())
            else:
                flat[key] = value
        return [
            override_string(key if key_of(self.base, key) else f"+{key}", value)
            for key, value in flat.items()
        ]

    def scores(self, cfg: RunConfig, qids: Sequence[str], overrides: Sequence[str]) -> Any:
        return self.replay.scores(
            cfg, qids, (self.metric_name, self.k), self.cfg.tune.stage, tuple(overrides)
        )

    def objective(self, train: Sequence[str]) -> Callable[[optuna.Trial], float]:
        def run(trial: optuna.Trial) -> float:
            params = self.space.suggest(trial)
            try:
                values, overrides, cfg = self.trial(params, train)
            except ConfigError as exc:  # a combination of in-range values the job refuses
                trial.set_user_attr("refused", str(exc))
                raise optuna.TrialPruned(str(exc)) from exc
            trial.set_user_attr("values", values)
            trial.set_user_attr("overrides", overrides)
            return float(self.scores(cfg, train, overrides).mean())

        return run

    # --- the run ---------------------------------------------------------------------------

    def folder(self) -> Path:
        """`tune.dir` (refused, before any work, where it cannot be a folder), else a new
        folder under outputs/tune/."""
        if self.cfg.tune.dir:
            folder = resolve_output(self.cfg.tune.dir)
            check_output_dir(folder, "tune.dir")
            return folder
        stamp = datetime.datetime.now().strftime("%Y-%m-%d/%H-%M-%S")
        base = resolve_output(f"outputs/tune/{stamp}-{self.replay.dataset.name}")
        return Path(claim_new_dir(str(base)))

    def plan(self) -> dict[str, Any]:
        """What the studies' trials depend on; a resumed run must have the same."""
        tune = self.cfg.tune
        return {
            "job_overrides": job_overrides(self.job_overrides),
            "space": self.space.describe(),
            "metric": f"{self.metric_name}@{self.k}",
            "stage": tune.stage,
            "folds": tune.folds,
            "seed": tune.seed,
            "sampler": tune.sampler,
            "sampler_seeds": sampler_seeds(tune.seed, tune.folds),
            "shrinkage": tune.shrinkage,
            "queries": len(self.ids),
        }

    def run(self) -> Tuning:
        folder = writable_dir(self.folder(), "tune.dir")  # a read-only one: named, exit 2
        with file_lock(folder / LOCK, f"tuning folder {folder}"):
            return self._run(folder)

    def _run(self, folder: Path) -> Tuning:
        tune = self.cfg.tune
        start = time.perf_counter()
        baseline = baseline_values(self.cfg, self.space, self.base)
        baseline_overrides = self.overrides(baseline)
        try:
            baseline_cfg = self.configs.make(baseline)
            check_config(baseline_cfg)
        except ConfigError as exc:
            raise ConfigError("tune.baseline", f"the job refuses it: {exc}") from exc
        baseline_scores = self.scores(baseline_cfg, self.ids, baseline_overrides)
        quiet_optuna()
        direction: Literal["maximize", "minimize"] = "maximize" if self.higher else "minimize"
        plan = self.plan()
        names = [ALL_QUERIES, *(fold_study(f) for f in range(tune.folds))]
        seeds = sampler_seeds(tune.seed, tune.folds)
        with study_file_faults(folder):  # corrupt, truncated, locked: named, exit 2
            storage = sqlite_storage(folder)
            studies = {
                name: open_study(
                    storage, name, make_sampler(tune.sampler, seeds[name]), direction, plan, folder
                )
                for name in names
            }
            total = len(names) * tune.trials
            done = sum(min(finished(s), tune.trials) for s in studies.values())
            if done:
                log.info("resuming %s: %d of %d trials already finished", folder, done, total)
            what = f"tuning ({tune.folds} folds + all queries, {tune.trials} trials each)"
            with progress(what, total, "trial") as bar:
                bar.update(done)
                for name, study in studies.items():
                    train = self.ids if name == ALL_QUERIES else self._train(name)
                    run_trials(study, tune.trials, self.objective(train), lambda: bar.update(1))
        summary = self._summary(studies, baseline, baseline_overrides, baseline_scores, folder)
        summary["seconds"] = round(time.perf_counter() - start, 2)
        summary["work"] = self.replay.work()
        markdown = tune_markdown(summary)
        atomic_write_json(folder / TUNE_JSON, summary)
        atomic_write_text(folder / TUNE_MD, markdown)
        chosen = best_trial(studies[ALL_QUERIES]).user_attrs["values"]
        tuned = self._write_tuned(folder, chosen)
        return Tuning(folder, summary, markdown, [folder / TUNE_JSON, folder / TUNE_MD, tuned])

    def _train(self, name: str) -> list[str]:
        fold = int(name.rpartition("-")[2])
        return [q for q in self.ids if self.fold_of[q] != fold]

    def _summary(
        self,
        studies: Mapping[str, Study],
        baseline: Mapping[str, Any],
        baseline_overrides: Sequence[str],
        baseline_scores: Any,
        folder: Path,
    ) -> dict[str, Any]:
        tune = self.cfg.tune
        folds = []
        held_out: dict[str, float] = {}
        folds_by_type = []
        for fold in range(tune.folds):
            best = best_trial(studies[fold_study(fold)])
            test = [q for q in self.ids if self.fold_of[q] == fold]
            train = [q for q in self.ids if self.fold_of[q] != fold]
            values = best.user_attrs["values"]
            overrides = best.user_attrs["overrides"]
            test_values = self.scores(self.configs.make(values), test, overrides)
            per_query = dict(zip(test, test_values.tolist(), strict=True))
            held_out.update(per_query)
            test_by_type = by_type(per_query, test, self.types)
            folds_by_type.append(test_by_type)
            folds.append(
                {
                    "fold": fold,
                    "train_ids": train,
                    "test_ids": test,
                    "chosen": overrides,
                    "train_score": best.value,
                    "test_score": mean(test_values),
                    "test_by_type": test_by_type,
                    "trial": best.number,
                    "trials": trial_counts(studies[fold_study(fold)]),
                }
            )
        best_all = best_trial(studies[ALL_QUERIES])
        tuned_overrides = best_all.user_attrs["overrides"]
        tuned_values = self.scores(
            self.configs.make(best_all.user_attrs["values"]), self.ids, tuned_overrides
        )
        tuned_by_type = by_type(dict(zip(self.ids, tuned_values.tolist(), strict=True)),
                                self.ids, self.types)  # fmt: skip
        counts = {**Counter(self.types.values()), "all": len(self.ids)}
        held_out_score = mean([f["test_score"] for f in folds])
        baseline_by_query = dict(zip(self.ids, baseline_scores.tolist(), strict=True))
        out: dict[str, Any] = {
            "metric": f"{self.metric_name}@{self.k}",
            "stage": tune.stage,
            "higher_is_better": self.higher,
            "dataset": self.replay.dataset.name,
            "job_overrides": job_overrides(self.job_overrides),
            "space": self.space.describe(),
            "settings": {
                "trials": tune.trials, "folds": tune.folds, "seed": tune.seed,
                "sampler": tune.sampler, "shrinkage": tune.shrinkage,
                "stratified_by": "query_type",
                "sampler_seeds": sampler_seeds(tune.seed, tune.folds),
                "sampler_seed_rule": SAMPLER_SEED_RULE,
            },
            "folds": folds,
            "tuned": {
                "chosen": tuned_overrides,
                "trial": best_all.number,
                "trials": trial_counts(studies[ALL_QUERIES]),
            },
            "tuned_score": best_all.value,
            "held_out_score": held_out_score,
            "gap": gap(best_all.value, held_out_score, self.higher),
            "by_type": type_table(tuned_by_type, folds_by_type, counts, self.higher),
            "baseline": {
                "chosen": list(baseline_overrides),
                "score": mean(baseline_scores),
                "by_type": by_type(baseline_by_query, self.ids, self.types),
                "held_out_comparison": baseline_comparison(
                    held_out, baseline_by_query, self.types,
                    significance_settings(self.cfg.compare), self.cfg.compare.min_queries,
                ),
                "test": "paired sign-flip test on held-out queries: each query's value under "
                "its fold's chosen configuration against the baseline's on the same query, "
                f"{self.cfg.compare.correction} over every type of the table",
            },
            "storage": storage_url(folder),
            "files": {"tune_json": TUNE_JSON, "tuned_yaml": TUNED_YAML, "study": STUDY_DB},
            "definitions": DEFINITIONS,
        }
        if baseline:
            out["baseline"]["given"] = {k: v for k, v in baseline.items()}
        if TYPE_WEIGHTS in self.space.keys:
            from_label = self.cfg.retriever.type_weights_from == TYPE_FROM_LABEL
            out["type_source"] = TYPE_ORACLE if from_label else TYPE_ROUTE
        return out

    def _write_tuned(self, folder: Path, values: Mapping[str, Any]) -> Path:
        chosen_cfg = self.configs.make(values)
        check_config(chosen_cfg)
        searchpath = [f"file://{Path(self.request.config_dir).resolve()}"] if (
            self.request.config_dir
        ) else []  # fmt: skip
        document = tuned_document(self.job_overrides, values, self.conf_dirs, searchpath)
        header = (
            f"# Chosen by python -m run.tune on all {len(self.ids)} scored queries of "
            f"{self.replay.dataset.name} ({self.metric_name}@{self.k}); its held-out estimate is "
            f"in {TUNE_JSON}.\n# Run it: python -m run --config-dir {folder} --config-name tuned\n"
        )
        return write_tuned(folder, document, header, chosen_cfg, self.conf_dirs)


def _probe_values(key: str, distribution: Any, arms: int) -> list[Any]:
    """The ends of a dimension's range (each choice of a categorical one), as job values; a
    continuous range also a point inside it that is no whole number, which an integer key
    refuses (its ends may be whole: `interval(1,9)`)."""
    if hasattr(distribution, "choices"):
        ends = list(distribution.choices)
    else:
        ends = [distribution.low, distribution.high]
        continuous = isinstance(distribution, optuna.distributions.FloatDistribution)
        if continuous and not distribution.step:
            inside = distribution.low + 0.381966 * (distribution.high - distribution.low)
            if not float(inside).is_integer() and key not in (WEIGHTS, TYPE_WEIGHTS):
                ends.append(inside)
    if key in (WEIGHTS, TYPE_WEIGHTS):
        top = max(ends)
        # One arm at each end while the others sit at the top: a vector of all-lowest weights
        # (all 0) is a trial the job refuses, not a bad range.
        return [[e if i == j else top for i in range(arms)] for e in ends for j in range(arms)]
    return ends


def tune(overrides: Sequence[str], config_dir: Path | None = None) -> Tuning:
    """Run (or resume) the tuning `python -m run.tune <overrides>` describes."""
    return Tuner(TuneRequest(list(overrides), config_dir)).run()
