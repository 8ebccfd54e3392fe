"""`python -m run.label`: active labelling of two compared jobs.

`plan DIR [DIR] --labels SNAPSHOT --budget B [--strategy active] [--rounds 2] --out PLAN`
  draws round 1 of a labelling plan over the queries both jobs ranked (DIR: a sweep of two jobs,
  or two job folders; SNAPSHOT: the evaluation set or label snapshot, with the model judge's
  grades where it gave them): B queries expected in all, each chosen independently with its
  inclusion probability (Poisson sampling) by `--strategy` uniform, disagreement, uncertainty
  or active, mixed with uniform by `--floor`; seeded by `--seed`. Writes PLAN/plan.json and
  PLAN/round-1/pool.jsonl + pool.csv: every unlabelled pooled pair of each chosen query, for
  people to fill in and `python -m run.pool --import` as usual.
`next PLAN --labels SNAPSHOT` draws the next planned round once every pair the earlier rounds
  sent out has people's grade in SNAPSHOT (exit 2 otherwise).
`estimate PLAN --labels SNAPSHOT [--out DIR]` prints and writes (estimate.md/.json, default in
  PLAN) each system's metric and the paired difference, per query type and overall, with the
  judge's prediction (inverse-probability-weighted PPI) and with people's labels only.
`simulate DIR [DIR] --judge KIND --model M [--budgets 30,60,90] [--draws 1000]` treats the
  evaluation set's labels as the truth and measures every strategy: interval width, coverage
  of the true value and agreement with the full-label verdict, per budget.

Exit 0 ok, 2 bad input (named), 3 internal error. The work is done by
`retrieval_bench.active`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from retrieval_bench.active.strategies import ACTIVE, STRATEGIES
from retrieval_bench.errors import EXIT_OK, ConfigError
from retrieval_bench.io.folders import check_output_dir
from retrieval_bench.progress import progress_on_stderr
from run.exits import guarded
from run.judge import add_judge_options, judge_of


def main(argv: Sequence[str] | None = None) -> int:
    """The command, with the exit codes of run.exits (2 bad input, 3 internal error); its
    progress (judging, simulating) on stderr."""
    with progress_on_stderr():
        return guarded(lambda: _main(argv))


def _budgets(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: comma-separated query counts") from None
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: positive query counts, e.g. 30,60,90")
    return sorted(set(values))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m run.label",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)

    plan = commands.add_parser("plan", help="draw round 1 of a labelling plan")
    plan.add_argument("dirs", nargs="+", type=Path, help="a sweep of two jobs, or two job folders")
    plan.add_argument("--labels", type=Path, required=True, help="the evaluation set or snapshot")
    plan.add_argument("--budget", type=int, required=True, help="queries to label in all")
    plan.add_argument("--strategy", choices=STRATEGIES, default=ACTIVE)
    plan.add_argument("--rounds", type=int, default=2, help="rounds the budget is split over")
    plan.add_argument("--first-share", type=float, default=0.3, help="round 1's share")
    plan.add_argument("--floor", type=float, default=0.2, help="mix with uniform (0, 1]")
    plan.add_argument("--unit", default="query", help="query (all pooled pairs of a query)")
    plan.add_argument("--metric", default="ndcg@K", help="the metric compared (K: top_k)")
    plan.add_argument("--stage", default="final")
    plan.add_argument("--seed", type=int, default=0)
    plan.add_argument("--out", type=Path, required=True, help="the plan's folder")

    nxt = commands.add_parser("next", help="draw the plan's next round")
    nxt.add_argument("plan", type=Path, help="the plan's folder")
    nxt.add_argument("--labels", type=Path, required=True, help="the snapshot with the labels")

    est = commands.add_parser("estimate", help="the estimates under the plan")
    est.add_argument("plan", type=Path, help="the plan's folder")
    est.add_argument("--labels", type=Path, required=True, help="the snapshot with the labels")
    est.add_argument("--confidence", type=float, default=0.95)
    est.add_argument("--out", type=Path, help="where estimate.md/.json go (default: the plan)")

    sim = commands.add_parser("simulate", help="measure the strategies where labels are known")
    sim.add_argument("dirs", nargs="+", type=Path, help="a sweep of two jobs, or two job folders")
    sim.add_argument("--budgets", type=_budgets, required=True, help="queries, e.g. 30,60,90")
    sim.add_argument("--strategy", dest="strategies", action="append", choices=STRATEGIES)
    sim.add_argument("--metric", default="ndcg@K")
    sim.add_argument("--stage", default="final")
    sim.add_argument("--draws", type=int, default=1000, help="plans simulated per cell")
    sim.add_argument("--second-draws", type=int, default=10, help="second rounds per first round")
    sim.add_argument("--first-share", type=float, default=0.3)
    sim.add_argument("--floor", type=float, default=0.2)
    sim.add_argument("--mc-draws", type=int, default=24, help="label draws behind a prediction")
    sim.add_argument("--confidence", type=float, default=0.95)
    sim.add_argument("--seed", type=int, default=0)
    sim.add_argument(
        "--shuffle-judge",
        action="store_true",
        help="permute the judge's verdicts over the pairs: a judge without signal (control)",
    )
    sim.add_argument("--out", type=Path, help="where simulation.md/.json go")
    add_judge_options(sim)
    return parser


def _main(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "plan":
        from retrieval_bench.active.plan import PlanSettings, create_plan

        check_output_dir(args.out, "--out")
        settings = PlanSettings(
            strategy=args.strategy,
            budget=args.budget,
            rounds=args.rounds,
            first_share=args.first_share,
            floor=args.floor,
            seed=args.seed,
            unit=args.unit,
        )
        plan, files = create_plan(
            args.dirs, args.labels, args.stage, args.metric, settings, args.out
        )
        _print_round(plan)
        print("wrote " + ", ".join(map(str, files)))
        return EXIT_OK
    if args.command == "next":
        from retrieval_bench.active.plan import next_round

        plan, files = next_round(args.plan, args.labels)
        _print_round(plan)
        print("wrote " + ", ".join(map(str, files)))
        return EXIT_OK
    if args.command == "estimate":
        from retrieval_bench.active.estimate import write_estimate

        text, files = write_estimate(args.plan, args.labels, args.confidence, args.out)
        print(text)
        print("wrote " + ", ".join(map(str, files)))
        return EXIT_OK
    return _simulate(args)


def _print_round(plan: dict) -> None:  # type: ignore[type-arg]
    record = plan["rounds"][-1]
    chosen = record["chosen"]
    print(
        f"round {record['round']} of {len(plan['round_budgets'])} ({plan['strategy']}, drawn as "
        f"{record['strategy_used']}): {len(chosen)} queries chosen of {len(record['pi'])} "
        f"candidates (expected {record['budget']:.1f}); {len(plan['certain'])} labelled already"
    )
    if record["calibration"] is None:
        print("  no calibration yet (fewer than 30 pairs people labelled that the judge graded)")


def _simulate(args: argparse.Namespace) -> int:
    from retrieval_bench.active.cases import build_case
    from retrieval_bench.active.context import find_jobs
    from retrieval_bench.active.report import simulation_markdown, write_simulation
    from retrieval_bench.active.simulate import Settings, simulate
    from retrieval_bench.judge.cache import JudgeCache

    if args.kind in (None, "none") or not args.model:
        raise ConfigError("--judge", "simulate needs a judge: --judge KIND --model MODEL")
    if args.draws < 1 or args.second_draws < 1 or args.draws % args.second_draws:
        raise ConfigError(
            "--draws",
            f"{args.draws} must be a positive multiple of --second-draws ({args.second_draws})",
        )
    if args.out is not None:
        check_output_dir(args.out, "--out")
    judge = judge_of(args, tuple(args.grades), need_thresholds=False)
    jobs = find_jobs(args.dirs)
    case = build_case(
        jobs,
        args.stage,
        args.metric,
        judge,
        JudgeCache(args.cache_dir),
        shuffle_seed=args.seed if args.shuffle_judge else None,
    )
    if max(args.budgets) > case.compared.n:
        raise ConfigError(
            "--budgets", f"{max(args.budgets)} queries, but the jobs share {case.compared.n}"
        )
    settings = Settings(
        budgets=args.budgets,
        strategies=tuple(args.strategies or STRATEGIES),
        first_share=args.first_share,
        floor=args.floor,
        first_rounds=args.draws // args.second_draws,
        second_draws=args.second_draws,
        mc_draws=args.mc_draws,
        seed=args.seed,
        confidence=args.confidence,
    )
    result = simulate(case, settings)
    result["judge"] = judge.describe() | {"shuffled": bool(args.shuffle_judge)}
    print(simulation_markdown(result))
    if args.out is not None:
        print("wrote " + ", ".join(map(str, write_simulation(result, args.out))))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
