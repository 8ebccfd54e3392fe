"""`python -m run.score QRELS RUN -k K [-k K2 ...] [--complete] [--json] [--metric M ...]
[--plugin MODULE ...]`: score any TREC run.

QRELS is TREC qrels or a native evaluation set (`.jsonl`, labels judged without a corpus check).
Prints the overall metrics and how many queries were scored or excluded (and why); `--json`
prints `{"overall": ..., "counts": ...}` with the metric names of metrics.json. `--metric`
(repeatable; `METRIC@N` with N one of the -k cut-offs, `METRIC@K` for every one, ir_measures'
spelling too) prints only those; an unknown name exits 2 with the nearest one. `--plugin MODULE`
imports a module that registers measures (`scoring.registry`) before scoring. Exit codes as
`python -m run` (run.exits): 2 on bad input, 3 on an internal error, 130 on Ctrl-C. The work
is done by the library (`retrieval_bench.score`, scoring/run_scores.py); this file only wires it
to the command line.

A TREC run cannot hold an empty ranking, so a system that returned nothing for a query leaves
it out of the file. `--complete` is trec_eval's `-c`: every scorable labelled query missing from
the run is scored as an empty ranking (0 on every ranking metric; `recall_bound`, which does not
depend on the ranking, keeps its value) and counted as `not_in_run_scored_0`; that is how a job
scores an empty ranking, so a job's export re-scores to its metrics.json exactly. Without it such
queries are excluded (`not_in_run`) and a warning on stderr gives their count.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from retrieval_bench.errors import ConfigError, DataError
from retrieval_bench.io.strict_json import strict_dumps
from retrieval_bench.scoring.aggregate import metric_names
from retrieval_bench.scoring.labels import NOT_IN_RUN
from retrieval_bench.scoring.measure_names import canonical_metric
from retrieval_bench.scoring.registry import load_plugins
from retrieval_bench.scoring.run_scores import (
    SCORED_ZERO,
    load_labels,
    load_rankings,
    score_rankings,
)
from run.exits import guarded
from run.options import add_plugin_option


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"cut-off must be an integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"cut-off must be positive, got {value}")
    return value


def missing_warning(counts: Mapping[str, Any]) -> str:
    """The stderr warning for labelled queries a run lacks ('' when there are none)."""
    n = counts["excluded"].get(NOT_IN_RUN, 0)
    if not n:
        return ""
    return (
        f"warning: {n} labelled quer{'y is' if n == 1 else 'ies are'} not in the run and "
        f"excluded ({NOT_IN_RUN}); a TREC run cannot hold an empty ranking, and a job's "
        "metrics.json (like trec_eval -c) scores them 0: add --complete to do the same"
    )


def selected_metrics(specs: Sequence[str], cutoffs: Sequence[int]) -> list[str]:
    """The metric names `--metric` asks for (every doc metric when none): `@K` stands for
    every cut-off; ConfigError naming `--metric[i]` for an unknown name or an unscored cut-off."""
    if not specs:
        return metric_names(cutoffs)
    names: list[str] = []
    for i, spec in enumerate(specs):
        key = f"--metric[{i}]"
        name, at, k = canonical_metric(spec, key).partition("@")
        if not at:  # an answer metric (the registry's answer family): scored from answers
            raise ConfigError(key, f"{spec!r} is an answer metric; run.score scores rankings")
        if k != "K" and int(k) not in cutoffs:
            raise ConfigError(key, f"{spec!r}: cut-off {k} is not scored; add -k {k}")
        ks = sorted(set(cutoffs)) if k == "K" else [int(k)]
        names += [f"{name}@{c}" for c in ks if f"{name}@{c}" not in names]
    doc = set(metric_names(cutoffs))
    for i, name in enumerate(names):
        if name not in doc:
            raise ConfigError(f"--metric[{i}]", f"{name} is not a doc metric run.score reports")
    return names


def format_table(
    result: dict[str, Any], cutoffs: Sequence[int], names: Sequence[str] | None = None
) -> str:
    overall, counts = result["overall"], result["counts"]
    lines = [f"{'metric':<20} value"]
    for name in metric_names(cutoffs) if names is None else names:
        value = overall[name]
        lines.append(f"{name:<20} {'undefined' if value is None else f'{value:.4f}'}")
    if "undefined" in overall:
        lines.append(f"undefined: {overall['undefined']}")
    lines.append(f"scored: {counts['scored']}")
    if SCORED_ZERO in counts:
        lines.append(f"scored as 0 (labelled, not in the run; --complete): {counts[SCORED_ZERO]}")
    for reason, n in counts["excluded"].items():
        lines.append(f"excluded ({reason}): {n}")
    if counts["not_in_labels"]:
        lines.append(f"ignored (run queries without labels): {counts['not_in_labels']}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """The command, with the exit codes of run.exits for whatever escapes it."""
    return guarded(lambda: _main(argv))


def _main(argv: Sequence[str] | None) -> int:
    parser = argparse.ArgumentParser(prog="python -m run.score", description="Score a TREC run.")
    parser.add_argument("qrels", type=Path, help="TREC qrels, or a native evaluation set .jsonl")
    parser.add_argument("run", type=Path, help="TREC run file (qid Q0 docid rank score tag)")
    parser.add_argument(
        "-k", dest="cutoffs", metavar="K", type=_positive_int, action="append", required=True
    )
    parser.add_argument(
        "--complete",
        action="store_true",
        help="score labelled queries missing from the run as 0 (trec_eval -c), as a job does",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--metric",
        dest="metrics",
        action="append",
        default=[],
        help="print only METRIC@N (N: a -k cut-off) or METRIC@K (every -k); repeatable",
    )
    add_plugin_option(parser)
    args = parser.parse_args(argv)
    load_plugins(args.plugins, "--plugin")
    names = selected_metrics(args.metrics, args.cutoffs)
    try:
        judgements = load_labels(args.qrels)
        rankings = load_rankings(args.run)
    except (DataError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    result = score_rankings(rankings, judgements, args.cutoffs, args.complete)
    warning = missing_warning(result["counts"])
    if warning:
        print(warning, file=sys.stderr)
    if args.json:
        overall = result["overall"]
        if args.metrics:
            overall = {k: v for k, v in overall.items() if k in names or "@" not in k}
        print(strict_dumps({"overall": overall, "counts": result["counts"]}, indent=2))
    else:
        print(format_table(result, args.cutoffs, names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
