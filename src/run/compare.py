"""`python -m run.compare DIR [DIR ...]`: the per-type comparison of any finished job folders.

DIR is a job folder or any folder above job folders (a sweep, a benchmark month). Prints the
verdict tables; writes comparison.md/.json and badcases.md/.json to `--out` (default: DIR when
exactly one is given). Every job folder skipped (unfinished, failed, interrupted) is named with
why. Exit codes as `python -m run` (run.exits): 2 on unreadable or missing folders, 3 on an
internal error, 130 on Ctrl-C.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from retrieval_bench.compare.build import compare_dirs
from retrieval_bench.config.compare import ESTIMATES, CompareConfig
from retrieval_bench.errors import ConfigError
from retrieval_bench.io.folders import check_output_dir
from retrieval_bench.jobdir.read import is_job_dir
from retrieval_bench.scoring.measure_names import canonical_compare_metrics
from retrieval_bench.scoring.registry import load_plugins
from run.exits import guarded
from run.options import add_plugin_option


def main(argv: Sequence[str] | None = None) -> int:
    """The command, with the exit codes of run.exits for whatever escapes it."""
    return guarded(lambda: _main(argv))


def _main(argv: Sequence[str] | None) -> int:
    defaults = CompareConfig()
    parser = argparse.ArgumentParser(prog="python -m run.compare", description=__doc__)
    parser.add_argument("dirs", nargs="+", type=Path, help="job folders or folders above them")
    parser.add_argument("--out", type=Path, help="where to write comparison.md/.json")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument(
        "--baseline",
        dest="baselines",
        action="append",
        default=[],
        help="ablation baseline, e.g. top_k=6 (KEY=VALUE[,KEY=VALUE], or a bare value of a "
        "varying key: bm25); repeatable, one ablation per baseline",
    )
    parser.add_argument(
        "--metric",
        dest="metrics",
        action="append",
        help=f"METRIC@K (K = each job's top_k) or METRIC@N, ir_measures' spelling too (nDCG@10); "
        f"repeatable (default: "
        f"{' '.join(defaults.metrics)})",
    )
    add_plugin_option(parser)
    parser.add_argument(
        "--judged-labels",
        type=Path,
        help="a label snapshot with a model judge's grades (run.judge, then run.pool --import): "
        "adds the estimates under people's labels, people's plus the judge's, and PPI",
    )
    parser.add_argument("--stage", default=defaults.stage)
    parser.add_argument("--alpha", type=float, default=defaults.alpha)
    parser.add_argument("--min-queries", type=int, default=defaults.min_queries)
    parser.add_argument("--resamples", type=int, default=defaults.n_resamples)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument(
        "--rank-resamples",
        type=int,
        default=defaults.rank_resamples,
        help="bootstrap resamples of each configuration's rank in the tiers",
    )
    parser.add_argument(
        "--correction",
        choices=["holm", "bh"],
        default=defaults.correction,
        help="multiple-testing correction: holm (family-wise error) or bh (false discovery rate)",
    )
    parser.add_argument("--power", type=float, default=defaults.power)
    parser.add_argument(
        "--target-delta",
        type=float,
        default=defaults.target_delta,
        help="the difference the 'queries needed' are for",
    )
    parser.add_argument(
        "--estimate",
        choices=ESTIMATES,
        default=defaults.estimate,
        help="active: also the estimates under a labelling plan (--label-plan), with verdicts",
    )
    parser.add_argument(
        "--label-plan", help="the plan's folder (python -m run.label plan --out DIR)"
    )
    args = parser.parse_args(argv)
    if args.estimate == "active" and not args.label_plan:
        raise ConfigError(
            "--label-plan", "--estimate active needs the plan's folder (python -m run.label plan)"
        )
    cfg = CompareConfig(
        stage=args.stage,
        metrics=args.metrics or list(defaults.metrics),
        alpha=args.alpha,
        min_queries=args.min_queries,
        n_resamples=args.resamples,
        seed=args.seed,
        rank_resamples=args.rank_resamples,
        baselines=list(args.baselines),
        correction=args.correction,
        power=args.power,
        target_delta=args.target_delta,
        estimate=args.estimate,
        label_plan=args.label_plan or "",
    )
    out = args.out
    if out is None and len(args.dirs) == 1 and not is_job_dir(args.dirs[0]):
        out = args.dirs[0]
    if out is not None and not args.no_write:
        check_output_dir(out, "--out")
    load_plugins(args.plugins, "--plugin")
    cfg.validate()
    canonical_compare_metrics(cfg)
    result = compare_dirs(
        args.dirs,
        cfg,
        out_dir=None if args.no_write else out,
        baseline_key="--baseline",
        judged_labels=args.judged_labels,
    )
    print(result.text)
    if out is None and not args.no_write:
        print("(pass --out DIR to write comparison.md and comparison.json)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
