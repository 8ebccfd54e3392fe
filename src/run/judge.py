"""`python -m run.judge POOL --judge openai --url URL --model NAME`: grade a judgment pool with a
model judge, for `python -m run.pool --import`.

POOL is a `pool.jsonl` (or `pool.csv`) from `python -m run.pool`. Every pair without a grade is
graded on UMBRELA's 0-3 relevance scale by a chat model behind any OpenAI-compatible endpoint
(`--url`: the API's base, e.g. http://127.0.0.1:8000/v1, or its chat-completions URL), with the
shipped English or Chinese prompt chosen by the text; or (`--judge cross_encoder --model DIR`)
by a FlagEmbedding reranker's score cut at `--thresholds` (or those a calibration chose,
`--calibration FILE`); or (`--judge similarity --model use|DIR`) by the cosine of the query's
and the passage's vectors from USE or a FlagEmbedding model folder, cut the same way. Writes
`judgments.jsonl` beside POOL (`--out FILE`): the pool with `source: judge`, the model, the
prompt's sha256 and the raw answer per pair. Answers are cached (`--cache-dir`), so a rerun asks
nothing twice and a killed run resumes.

`python -m run.judge --calibrate --evalset EVALSET --corpus CORPUS_DIR --judge ...` grades pairs
people already labelled and reports the agreement (Cohen's kappa, weighted kappa, confusion
matrix, per query type) into `--out DIR` (default outputs/calibration): calibration.md,
calibration.json and calibration.jsonl (importable). A cross-encoder's thresholds are chosen on
half of the pairs and the agreement reported on the other half.

Exit 0 ok; 2 bad input (a malformed --url, a missing prompt file, an unknown --judge, a bad
pool record, or a run where the judge graded no pair); 3 internal error. The work is done by
`retrieval_bench.judge`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from retrieval_bench.config.judge import JUDGES, JudgeSettings
from retrieval_bench.data.judgments import DEFAULT_GRADES
from retrieval_bench.errors import EXIT_OK, ConfigError
from retrieval_bench.judge.base import Judge, cli_key
from retrieval_bench.judge.build import build_judge, check_thresholds
from retrieval_bench.judge.cache import JudgeCache
from retrieval_bench.judge.files import CALIBRATION_JSON, JUDGMENTS
from run.exits import guarded
from run.options import grades_option
from run.typed_options import add_fields, read_fields

DEFAULT_CALIBRATION_DIR = Path("outputs/calibration")


def main(argv: Sequence[str] | None = None) -> int:
    """The command, with the exit codes of run.exits (2 bad input, 3 internal error)."""
    return guarded(lambda: _main(argv))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m run.judge",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("pool", nargs="?", type=Path, help="pool.jsonl or pool.csv to judge")
    parser.add_argument(
        "--out", type=Path, help="judging: the judgment file; --calibrate: a folder"
    )
    add_judge_options(parser)
    cal = parser.add_argument_group("--calibrate").add_argument
    cal("--calibrate", action="store_true", help="measure the judge against people's labels")
    cal("--evalset", type=Path, help="the evaluation set whose labels to measure against")
    cal("--corpus", type=Path, help="its corpus folder")
    cal("--sample", default="all", help="how many labelled pairs to judge (default all)")
    cal("--seed", type=int, default=0, help="for the sample and the cross-encoder's halves")
    return parser


def add_judge_options(parser: argparse.ArgumentParser, required: bool = True) -> None:
    """The flags that describe a judge (`judge_of` reads them): one per field of
    `config.judge.JudgeSettings`, the type the monthly job's `benchmark.judge` node is too
    (`--judge` its kind, `--url`, `--timeout-s`, ...), the answers' cache, and a calibration
    whose thresholds to use."""
    add_fields(
        parser,
        JudgeSettings,
        required=("kind", "model") if required else (),
        choices={"kind": JUDGES},
        converters={"grades": grades_option},
    )
    parser.add_argument(
        "--cache-dir", type=Path, default=Path("outputs/cache"), help="answers cached here"
    )
    parser.add_argument(
        "--calibration", type=Path, help="a calibration.json whose thresholds to use"
    )


def _thresholds(args: argparse.Namespace, settings: JudgeSettings) -> list[float]:
    """The thresholds of --thresholds or of --calibration's file (empty: none given)."""
    if settings.thresholds and args.calibration is not None:
        raise ConfigError("--thresholds", "give --thresholds or --calibration, not both")
    if args.calibration is None:
        return list(settings.thresholds)
    path = args.calibration / CALIBRATION_JSON if args.calibration.is_dir() else args.calibration
    try:
        values = json.loads(path.read_text(encoding="utf-8"))["judge"]["thresholds"]
        values = [float(v) for v in values]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(
            "--calibration", f"{path}: not a cross-encoder's calibration.json ({exc!r})"
        ) from None
    check_thresholds(values, tuple(settings.grades), "--calibration", cli_key)
    return values


def judge_settings(args: argparse.Namespace) -> JudgeSettings:
    """The judge's settings the flags give (`add_judge_options`)."""
    settings = read_fields(args, JudgeSettings)
    settings.grades = list(settings.grades)
    settings.thresholds = _thresholds(args, settings)
    return settings


def judge_of(args: argparse.Namespace, scale: Sequence[int], need_thresholds: bool) -> Judge:
    """The judge the flags describe."""
    return build_judge(judge_settings(args), scale, need_thresholds)


def _sample(text: str) -> int | None:
    if text == "all":
        return None
    try:
        value = int(text)
    except ValueError:
        raise ConfigError("--sample", f"a number of pairs or 'all', got {text!r}") from None
    if value <= 0:
        raise ConfigError("--sample", f"must be positive, got {value}")
    return value


def _main(argv: Sequence[str] | None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    scale = tuple(args.grades)
    cache = JudgeCache(args.cache_dir)
    if args.calibrate:
        if args.pool is not None:
            parser.error("--calibrate judges pairs of --evalset, not a pool: drop POOL")
        if args.evalset is None or args.corpus is None:
            parser.error("--calibrate needs --evalset EVALSET and --corpus CORPUS_DIR")
        from retrieval_bench.judge.calibrate import calibrate

        sample = _sample(args.sample)
        judge = judge_of(args, scale, need_thresholds=False)
        result = calibrate(args.evalset, args.corpus, judge, cache, scale, sample, args.seed)
        files = result.write(args.out or DEFAULT_CALIBRATION_DIR)
        print(files[2].read_text(encoding="utf-8"))
        print("wrote " + ", ".join(map(str, files)))
        return EXIT_OK
    if args.pool is None:
        parser.error("give POOL (a pool.jsonl) to judge, or --calibrate")
    if not args.pool.is_file():
        raise ConfigError("POOL", f"{args.pool}: no such file (a pool.jsonl of python -m run.pool)")
    from retrieval_bench.judge.judging import judge_pool

    judge = judge_of(args, scale, need_thresholds=True)
    out = args.out or args.pool.parent / JUDGMENTS
    _, tally = judge_pool(args.pool, judge, cache, out)
    described = judge.describe()
    print(f"judge: {described['kind']} {described['model']}")
    print("\n".join(tally.lines()))
    print(f"wrote {out}; import it with")
    print(f"  python -m run.pool --import {out} --evalset EVALSET --corpus CORPUS_DIR", end="")
    print("" if scale == DEFAULT_GRADES else f" --grades {','.join(map(str, scale))}")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
