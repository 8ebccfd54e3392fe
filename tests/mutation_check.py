"""Mutation check: plant one deliberate bug at a time and expect the tests to fail.

Each mutation is a text edit of one source file (`old` must occur exactly once) applied to a
copy of the repository, never to the working tree; the fast tests (not marked slow) that guard
that code then run on the copy (`pytest -x -m "not slow"`). A mutation the tests do not catch
("SURVIVED") means a result-changing bug would pass the suite. Usage (from the repository root):

    python tests/mutation_check.py              # every mutation
    python tests/mutation_check.py -k fill      # those whose name contains "fill"
    python tests/mutation_check.py --list

Exit status: 0 when every mutation was caught, 1 when one survived or no longer applies (the
code it edits changed: update its `old` text).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COPIED = ("src", "tests", "conf", "corpus", "evalsets", "pyproject.toml")
# Each mutant must be caught by the fast tier (what `make fast` and every edit run), not only by
# a slow test that runs the app as a subprocess.
FAST = ("-m", "not slow")


@dataclass(frozen=True)
class Mutation:
    name: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]


FILTER = "src/retrieval_bench/job/filters.py"
GATE = "src/retrieval_bench/benchmark/gate.py"
PIPELINE = "src/retrieval_bench/job/pipeline.py"
RRF = "src/retrieval_bench/fusion/rrf.py"
FILL = "src/retrieval_bench/fusion/fill.py"
SCORE = "src/retrieval_bench/fusion/score.py"
FUSION_TESTS = ("tests/unit/fusion/test_fusion.py", "tests/unit/job/test_pipeline_scripted.py")
METRICS = "src/retrieval_bench/scoring/metrics.py"
PERMISSIONS = "src/retrieval_bench/scoring/permissions.py"
TIEBREAK = "src/retrieval_bench/tiebreak.py"
BM25 = "src/retrieval_bench/retrievers/bm25.py"
BM25_BUILD = "src/retrieval_bench/retrievers/bm25_build.py"
HTTP_JSON = "src/retrieval_bench/http_json.py"
CUT = "src/retrieval_bench/stages/cut.py"
RUN_FILE = "src/retrieval_bench/retrievers/run_file.py"
M3 = "src/retrieval_bench/retrievers/m3.py"
M3_TESTS = ("tests/unit/retrievers/test_m3_scoring.py",)
RUN_SCORES = "src/retrieval_bench/scoring/run_scores.py"
JUDGMENTS = "src/retrieval_bench/data/judgments.py"
ANSWERS = "src/retrieval_bench/answers/score.py"
DRIVER = "src/retrieval_bench/benchmark/month.py"
BM25_CONFIG = "src/retrieval_bench/config/bm25.py"
TUNE_RUN = "src/retrieval_bench/tune/run.py"
POWER = "src/retrieval_bench/stats/power.py"
CORRECTIONS = "src/retrieval_bench/stats/corrections.py"
PPI = "src/retrieval_bench/stats/ppi.py"
ESTIMATES = "src/retrieval_bench/judge/estimates.py"
ROBUSTNESS = "src/retrieval_bench/scoring/robustness.py"
CONTRACT = "src/retrieval_bench/job/contract.py"
BOOTSTRAP = "src/retrieval_bench/stats/bootstrap.py"
TIERS = "src/retrieval_bench/stats/tiers.py"
PARETO = "src/retrieval_bench/stats/pareto.py"
BASELINES = "src/retrieval_bench/compare/baselines.py"
TRUNCATE = "src/retrieval_bench/perturb/truncate.py"
WIDTH = "src/retrieval_bench/perturb/width.py"
SPACING = "src/retrieval_bench/perturb/spacing.py"
CHAT = "src/retrieval_bench/judge/chat.py"
MARKER = "src/retrieval_bench/jobdir/marker.py"
READ = "src/retrieval_bench/jobdir/read.py"
PARITY = "src/retrieval_bench/text/segment/parity.py"
ATOMIC = "src/retrieval_bench/io/atomic.py"
KIND_TESTS = ("tests/unit/perturb/test_kinds.py",)
ROBUSTNESS_TESTS = ("tests/unit/scoring/test_robustness_cells.py",)
ESTIMATE_TESTS = ("tests/unit/judge/test_estimates.py", "tests/unit/stats/test_ppi.py")
POWER_TESTS = ("tests/unit/stats/test_power.py",)
HELD_OUT_TESTS = ("tests/unit/tune/test_held_out.py",)
GATE_TESTS = ("tests/unit/benchmark/test_gate_units.py", "tests/unit/benchmark/test_monthly.py")
# The job on the mini fixture, in-process and through the app.
JOB_TESTS = ("tests/integration/test_job.py", "tests/app/test_app.py")
PIPELINE_TESTS = ("tests/unit/job/test_pipeline_scripted.py", *JOB_TESTS)
POLICY_TESTS = (
    "tests/integration/test_golden_policy.py",
    "tests/unit/scoring/test_scoring_permissions.py",
)
METRIC_TESTS = ("tests/unit/scoring/test_metrics.py", "tests/unit/scoring/test_scoring_parity.py")

MUTATIONS = [
    Mutation(
        "filter hides public passages from every role",
        FILTER,
        "(a is None or role in a for a in self.acl)",
        "(a is not None and role in a for a in self.acl)",
        POLICY_TESTS,
    ),
    Mutation(
        "filter ignores the role",
        FILTER,
        "mask &= self.readable(user_role)",
        "mask &= True",
        POLICY_TESTS,
    ),
    Mutation(
        "scoring counts public passages as unreadable",
        PERMISSIONS,
        "return acl is None or role is None or role in acl",
        "return role is None or (acl is not None and role in acl)",
        POLICY_TESTS,
    ),
    Mutation(
        "city filter drops passages without a city",
        FILTER,
        'np.isin(self.city, [*cities, ""])',
        "np.isin(self.city, [*cities])",
        ("tests/unit/job/test_pipeline_scripted.py",),
    ),
    Mutation(
        "gate compares the drop with >= instead of >",
        GATE,
        "if c.loss > c.tolerance:",
        "if c.loss >= c.tolerance:",
        GATE_TESTS,
    ),
    Mutation(
        "gate ignores significance",
        GATE,
        "significant = c.p_holm < gate.alpha",
        "significant = True",
        GATE_TESTS,
    ),
    Mutation(
        "gate skips Holm",
        GATE,
        "holm(list(tested.values()))",
        "list(tested.values())",
        GATE_TESTS,
    ),
    Mutation(
        "gate's too-few rule with a family of one",
        GATE,
        "reason = too_few(c.n, family, gate_settings(gate, sig), min_queries)",
        "reason = too_few(c.n, 1, gate_settings(gate, sig), min_queries)",
        GATE_TESTS,
    ),
    Mutation(
        "fill lets the last arm lead",
        FILL,
        "        for pool in pools:\n            for index in pool.indices.tolist():",
        "        for pool in reversed(pools):\n            for index in pool.indices.tolist():",
        (*FUSION_TESTS, *JOB_TESTS),
    ),
    Mutation(
        "final cut keeps top_k - 1 passages",
        CUT,
        "return Ranked(ranked.indices[:k], ranked.scores[:k], k, ranked.empty_reason)",
        "return Ranked(ranked.indices[: k - 1], ranked.scores[: k - 1], k, ranked.empty_reason)",
        PIPELINE_TESTS,
    ),
    Mutation(
        "RRF ranks from 0",
        RRF,
        "np.arange(1, pool.returned + 1, dtype=np.float64)",
        "np.arange(0, pool.returned, dtype=np.float64)",
        FUSION_TESTS,
    ),
    Mutation(
        "RRF ignores its k (combiners.rrf.k)",
        RRF,
        "weight / (self.k + np.arange",
        "weight / (RRF_K + np.arange",
        FUSION_TESTS,
    ),
    Mutation(
        "min-max forgets to subtract the minimum",
        SCORE,
        "(scores - low) / max(scores.max() - low, FLOOR)",
        "scores / max(scores.max() - low, FLOOR)",
        FUSION_TESTS,
    ),
    Mutation(
        "z-score with the sample standard deviation",
        SCORE,
        "scores.std()",
        "scores.std(ddof=1)",
        FUSION_TESTS,
    ),
    Mutation(
        "CombMNZ counts an arm of weight 0",
        SCORE,
        "float(w > 0)",
        "1.0",
        FUSION_TESTS,
    ),
    Mutation(
        "tie-break by id ascending",
        TIEBREAK,
        "np.lexsort((-self.id_order[candidates], -scores))",
        "np.lexsort((self.id_order[candidates], -scores))",
        ("tests/unit/job/test_pipeline_scripted.py", "tests/unit/test_fast_paths.py"),
    ),
    Mutation(
        "leak@K divided by the passages shown instead of K",
        PERMISSIONS,
        'columns[f"leak@{k}"] = leaked / float(k)',
        'columns[f"leak@{k}"] = leaked / np.maximum(shown[:, :k].sum(axis=1), 1)',
        POLICY_TESTS,
    ),
    Mutation(
        "recall divides by k instead of the relevant count",
        METRICS,
        "return _per_relevant(hits(rg), rg)",
        "return hits(rg) / float(rg.k)",
        METRIC_TESTS,
    ),
    Mutation(
        "MRR counts ranks from 0",
        METRICS,
        "1.0 / (ranks[first] + 1.0)",
        "1.0 / (ranks[first] + 2.0)",
        METRIC_TESTS,
    ),
    Mutation(
        "nDCG discounts from log2(1)",
        METRICS,
        "np.log2(np.arange(2, k + 2, dtype=np.float64))",
        "np.log2(np.arange(3, k + 3, dtype=np.float64))",
        METRIC_TESTS,
    ),
    Mutation(
        "AP divides by the relevant ids within k instead of all of them",
        METRICS,
        "return _per_relevant(np.bincount(rows, weights=precisions, minlength=rg.n), rg)",
        "return np.bincount(rows, weights=precisions, minlength=rg.n)"
        " / np.maximum(np.minimum(rg.n_relevant, rg.k), 1)",
        (*METRIC_TESTS, "tests/unit/scoring/test_measures_map.py"),
    ),
    Mutation(
        "all_hit scores queries without relevant ids",
        METRICS,
        "    out[rg.n_relevant == 0] = np.nan\n",
        "",
        METRIC_TESTS,
    ),
    Mutation(
        "BM25 epsilon floor dropped",
        BM25_BUILD,
        "idf[idf < 0] = epsilon * average_idf",
        "idf[idf < 0] = 0.0",
        ("tests/unit/retrievers/test_bm25.py",),
    ),
    # Issue 20: behaviour the fast tier did not pin.
    Mutation(
        "service arm does not retry HTTP 429",
        HTTP_JSON,
        "RETRIED_STATUSES = frozenset({429, 500, 502, 503, 504})",
        "RETRIED_STATUSES = frozenset({500, 502, 503, 504})",
        ("tests/unit/retrievers/test_service_arm.py",),
    ),
    Mutation(
        "run_file counts queries outside the evaluation set as without known ids",
        RUN_FILE,
        '"queries_without_known_ids": len([q for q in without_known if q in asked]),',
        '"queries_without_known_ids": len(without_known),',
        ("tests/unit/retrievers/test_run_file_arm.py",),
    ),
    Mutation(
        "ColBERT max-sim summed instead of averaged over query tokens",
        M3,
        "return (best.sum(axis=1) / len(q)).astype(np.float64)",
        "return best.sum(axis=1).astype(np.float64)",
        M3_TESTS,
    ),
    Mutation(
        "sparse arm returns passages sharing no token (score 0)",
        M3,
        "matched = scores > 0",
        "matched = scores >= 0",
        M3_TESTS,
    ),
    Mutation(
        "arms.m3.weights for sparse and ColBERT swapped",
        M3,
        "self.weights, (scorer.dense, scorer.sparse, scorer.colbert), strict=True",
        "self.weights, (scorer.dense, scorer.colbert, scorer.sparse), strict=True",
        M3_TESTS,
    ),
    Mutation(
        "run.score --complete scores excluded (unscorable) queries as 0",
        RUN_SCORES,
        "missing = [qid for qid in judgements.qrels if qid not in rankings]",
        "missing = [qid for qid in judgements.query_types if qid not in rankings]",
        ("tests/app/test_score_cli.py", "tests/integration/test_score_complete.py"),
    ),
    Mutation(
        "an empty ranking blamed on the filter whenever a mask exists",
        PIPELINE,
        "reason = FILTERED_OUT if mask is not None and not mask.any() else NO_CANDIDATES",
        "reason = FILTERED_OUT if mask is not None else NO_CANDIDATES",
        ("tests/unit/job/test_pipeline_scripted.py",),
    ),
    Mutation(
        "conflicting relevant grades (1 and 2) for one pair accepted",
        JUDGMENTS,
        "elif earlier.grade != grade:",
        "elif (earlier.grade > 0) != (grade > 0):",
        ("tests/unit/labels/test_pool.py",),
    ),
    Mutation(
        "a document citation counted once per passage shown",
        ANSWERS,
        "out.valid += bool(shown)",
        "out.valid += len(shown)",
        ("tests/unit/answers/test_answers.py",),
    ),
    Mutation(
        "pooled source coverage divided by the passages cited",
        ANSWERS,
        'pooled={"source_coverage_pooled": ("cited_relevant", "n_relevant")},',
        'pooled={"source_coverage_pooled": ("cited_relevant", "cited")},',
        ("tests/unit/answers/test_answers.py",),
    ),
    Mutation(
        "gate's plan check misses a dataset file added or removed",
        GATE,
        "for name in sorted(set(old_files) | set(new_files)):",
        "for name in sorted(set(old_files) & set(new_files)):",
        GATE_TESTS,
    ),
    Mutation(
        "monthly rerun re-runs finished jobs",
        DRIVER,
        "[r for r in retrievers if (dataset, r) not in done] for dataset in datasets}",
        "list(retrievers) for dataset in datasets}",
        ("tests/unit/benchmark/test_monthly.py",),
    ),
    Mutation(
        "arms.bm25.b=1 (a valid value) refused",
        BM25_CONFIG,
        # The BM25 node's check (the Lucene node below it has one alike).
        'if not 0 <= self.b <= 1:\n            raise ConfigError("b", f"must be within [0, 1], '
        'got {self.b}")\n\n\n@dataclass\nclass BM25ArmConfig',
        'if not 0 <= self.b < 1:\n            raise ConfigError("b", f"must be within [0, 1], '
        'got {self.b}")\n\n\n@dataclass\nclass BM25ArmConfig',
        ("tests/unit/config/test_config.py",),
    ),
    # Issue 35: what a tired developer writes, which no fast test caught.
    Mutation(
        "the randomized test's power taken as the t-test's at alpha (resampling ignored)",
        POWER,
        "return float(weights @ _t_powers(delta, sd, n, criticals))",
        "return t_test_power(delta, sd, n, alpha_test)",
        POWER_TESTS,
    ),
    Mutation(
        "a type's row and `all` on a set of one type tested as two tests of the family",
        CORRECTIONS,
        "if identities is None else list(identities)",
        "if True else list(identities)",
        ("tests/unit/stats/test_corrections.py",),
    ),
    Mutation(
        "PPI's unlabelled queries those the judge's labels score, not people's",
        ESTIMATES,
        "rest = [q for q in people if q not in labelled]",
        "rest = [q for q in by_name.get(PPI, {}) if q not in labelled]",
        ESTIMATE_TESTS,
    ),
    Mutation(
        "PPI's prediction undefined where the judge's labels leave nothing relevant",
        ESTIMATES,
        "    for name in (PPI, MIXED):",
        "    for name in (PPI, PEOPLE):",
        ESTIMATE_TESTS,
    ),
    Mutation(
        "PPI's variances with ddof 0, the classical interval's with ddof 1",
        PPI,
        "f_unlabelled.var(ddof=1) / len(f_unlabelled) + rectifier.var(ddof=1) / len(y)",
        "f_unlabelled.var() / len(f_unlabelled) + rectifier.var() / len(y)",
        ESTIMATE_TESTS,
    ),
    Mutation(
        "a kind the text normalisation erases reported as a test that holds",
        ROBUSTNESS,
        "if key in pairs and pairs[key][0] == pairs[key][1]",
        "if key in pairs and pairs[key][0] != pairs[key][1]",
        ROBUSTNESS_TESTS,
    ),
    Mutation(
        "per-type pooled stable@K divided by the largest group's count",
        ROBUSTNESS,
        'return {t: {"n": len(v), name: json_number(sum(v) / len(v))} for t, v in values.items()}',
        'return {t: {"n": len(v), name: json_number(sum(v) / len(values[ALL]))} '
        "for t, v in values.items()}",
        ROBUSTNESS_TESTS,
    ),
    Mutation(
        "a passage twice in a ranking caught only when side by side",
        CONTRACT,
        "keys = np.sort(segment * self.n + flat)",
        "keys = segment * self.n + flat",
        ("tests/unit/job/test_contract.py",),
    ),
    Mutation(
        "a fused ranking may keep only what the strategy's first arm returned",
        PIPELINE,
        "given.append(np.concatenate([pool.indices for pool in pools]))",
        "given.append(pools[0].indices)",
        ("tests/unit/job/test_contract.py",),
    ),
    Mutation(
        "rank intervals one-sided (the whole 1 - confidence in each tail)",
        BOOTSTRAP,
        "tail = (1.0 - confidence) / 2.0",
        "tail = 1.0 - confidence",
        ("tests/unit/stats/test_bootstrap.py",),
    ),
    Mutation(
        "tiers take the higher mean as better on a lower-is-better measure",
        TIERS,
        "better = a if (diff < 0) == lower else b",
        "better = a if diff > 0 else b",
        ("tests/unit/stats/test_tiers.py",),
    ),
    Mutation(
        "a robustness verdict takes a rise as better on a lower-is-better measure",
        ROBUSTNESS,
        "better = delta.diff < 0 if lower_is_better(metric) else delta.diff > 0",
        "better = delta.diff > 0",
        ROBUSTNESS_TESTS,
    ),
    Mutation(
        "a zero cost read as no cost measured",
        PARETO,
        "for label, c in cost.items() if c is not None}",
        "for label, c in cost.items() if c}",
        ("tests/unit/stats/test_pareto.py",),
    ),
    Mutation(
        "a baseline of several keys matched by any one of them",
        BASELINES,
        "if not any(all(j.setting.get(k) == v for k, v in spec.items()) for j in jobs):",
        "if not any(any(j.setting.get(k) == v for k, v in spec.items()) for j in jobs):",
        ("tests/unit/compare/test_compare_baselines.py",),
    ),
    Mutation(
        "truncate makes a variant of a query exactly truncate_chars long",
        TRUNCATE,
        "if len(query.query.rstrip()) <= self.chars or not text:",
        "if len(query.query.rstrip()) < self.chars or not text:",
        KIND_TESTS,
    ),
    Mutation(
        "fullwidth leaves the last ASCII character (~) narrow",
        WIDTH,
        'if "!" <= a <= "~"}',
        'if "!" <= a < "~"}',
        KIND_TESTS,
    ),
    Mutation(
        "unspacing counts only the ASCII space as whitespace",
        SPACING,
        "removed = [i for i, ch in enumerate(query.query) if ch.isspace()]",
        'removed = [i for i, ch in enumerate(query.query) if ch == " "]',
        KIND_TESTS,
    ),
    Mutation(
        "spacing takes an ideographic space or a tab for a word character",
        SPACING,
        'return not unicodedata.category(ch).startswith(("Z", "P", "S", "C"))',
        'return ch != " " and not unicodedata.category(ch).startswith(("P", "S"))',
        KIND_TESTS,
    ),
    Mutation(
        "the chat judge's cache key without the model",
        CHAT,
        "return [pair.query, pair.passage, self.prompt_for(pair).sha256, self.model]",
        "return [pair.query, pair.passage, self.prompt_for(pair).sha256]",
        ("tests/unit/judge/test_judge_cache.py",),
    ),
    Mutation(
        "the marker reads a process's state after the first ')' of its name",
        MARKER,
        'stat.rpartition(")")[2]',
        'stat.partition(")")[2]',
        ("tests/unit/jobdir/test_jobdir_marker.py",),
    ),
    Mutation(
        "another user's process read as gone",
        MARKER,
        "except PermissionError:  # it exists, owned by another user\n        pass",
        "except PermissionError:  # it exists, owned by another user\n        return False",
        ("tests/unit/jobdir/test_jobdir_marker.py",),
    ),
    Mutation(
        "a job without top_k takes its largest cut-off",
        READ,
        "return int(min(cutoffs))",
        "return int(max(cutoffs))",
        ("tests/unit/jobdir/test_jobdir_read.py",),
    ),
    Mutation(
        "token parity checks the cut only, not the indexed tokens",
        PARITY,
        "if reference_tokens != fast_tokens:",
        "if False:",
        ("tests/unit/text/test_segment_parity.py",),
    ),
    Mutation(
        "the gate's family counts the checks without paired queries",
        GATE,
        "_judge(c, len(tested), gate, sig, min_queries)",
        "_judge(c, len(checks), gate, sig, min_queries)",
        GATE_TESTS,
    ),
    Mutation(
        "an atomic write interrupted by Ctrl-C leaves its temp file",
        ATOMIC,
        "except BaseException as exc:",
        "except Exception as exc:",
        ("tests/unit/io/test_atomic.py",),
    ),
    Mutation(
        "every tuning study's sampler seeded with the run's seed",
        TUNE_RUN,
        "make_sampler(tune.sampler, seeds[name])",
        "make_sampler(tune.sampler, tune.seed)",
        HELD_OUT_TESTS,
    ),
    Mutation(
        "a fold's number read from the last character of its study's name",
        TUNE_RUN,
        'fold = int(name.rpartition("-")[2])',
        "fold = int(name[-1])",
        HELD_OUT_TESTS,
    ),
]


def copy_tree(target: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", "outputs")
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, target / name, ignore=ignore)
        else:
            shutil.copy2(source, target / name)


def run_one(mutation: Mutation, pristine: Path) -> tuple[str, str]:
    """(verdict, detail): CAUGHT, SURVIVED, STALE (the edit no longer applies) or NO TESTS (a
    test file it names is gone: moved or renamed, so update `tests`)."""
    tests = list(mutation.tests)
    missing = [t for t in tests if not (pristine / t).is_file()]
    if missing:
        return "NO TESTS", f"no such test file: {', '.join(missing)}"
    with tempfile.TemporaryDirectory(prefix="mutant-") as tmp:
        work = Path(tmp)
        shutil.copytree(pristine, work, dirs_exist_ok=True)
        path = work / mutation.path
        text = path.read_text(encoding="utf-8")
        if text.count(mutation.old) != 1:
            return "STALE", f"{mutation.path}: the text to edit occurs {text.count(mutation.old)}x"
        path.write_text(text.replace(mutation.old, mutation.new), encoding="utf-8")
        env = {**os.environ, "PYTHONPATH": str(work / "src"), "PYTHONDONTWRITEBYTECODE": "1"}
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *FAST, *tests],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
    failed = [line for line in proc.stdout.splitlines() if line.startswith("FAILED")]
    if proc.returncode == 1:
        return "CAUGHT", failed[0].removeprefix("FAILED ") if failed else "a test failed"
    if proc.returncode == 0:
        return "SURVIVED", f"{' '.join(tests)} all pass"
    return "ERROR", f"pytest exited {proc.returncode}: {proc.stdout[-500:]}{proc.stderr[-500:]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-k", default="", help="only mutations whose name contains this")
    parser.add_argument("--list", action="store_true", help="list the mutations and exit")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTATIONS if args.k.lower() in m.name.lower()]
    if args.list:
        for m in chosen:
            print(f"{m.name}  ({m.path}; {', '.join(m.tests)})")
        return 0
    bad = 0
    with tempfile.TemporaryDirectory(prefix="mutation-check-") as tmp:
        pristine = Path(tmp)
        copy_tree(pristine)
        for m in chosen:
            start = time.perf_counter()
            verdict, detail = run_one(m, pristine)
            bad += verdict != "CAUGHT"
            print(f"{verdict:<9} {m.name} ({time.perf_counter() - start:.0f}s): {detail}")
            sys.stdout.flush()
    print(f"{len(chosen) - bad} of {len(chosen)} mutations caught")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
