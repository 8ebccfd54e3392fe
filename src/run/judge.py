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

from retrieval_bench.data.judgments import DEFAULT_GRADES
from retrieval_bench.errors import EXIT_OK, ConfigError
from retrieval_bench.judge.base import Judge, cli_key
from retrieval_bench.judge.build import JUDGE_KINDS, JudgeSpec, build_judge, check_thresholds
from retrieval_bench.judge.cache import JudgeCache
from retrieval_bench.judge.chat import ChatSettings
from retrieval_bench.judge.files import CALIBRATION_JSON, JUDGMENTS
from run.exits import guarded
from run.options import grades_option

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
    """The flags that describe a judge (`judge_of` reads them): its kind and model, the grade
    scale, the answers' cache, and each kind's own settings."""
    add = parser.add_argument
    add("--judge", choices=JUDGE_KINDS, required=required, help="the kind of judge")
    add(
        "--model",
        required=required,
        help="openai: the model's name; cross_encoder: its folder; similarity: use or a folder",
    )
    add("--grades", type=grades_option, default=DEFAULT_GRADES, help="0,1 (default) or 0,1,2,3")
    add("--cache-dir", type=Path, default=Path("outputs/cache"), help="answers cached here")
    chat = parser.add_argument_group("--judge openai").add_argument
    chat("--url", help="the API's base (http://HOST:PORT/v1) or its /chat/completions URL")
    chat("--relevant-from", type=int, default=2, help="on 0,1: relevant from this 0-3 grade")
    chat("--prompt-en", type=Path, help="an English prompt file instead of the shipped one")
    chat("--prompt-zh", type=Path, help="a Chinese prompt file instead of the shipped one")
    chat("--concurrency", type=int, default=8, help="requests in flight")
    chat("--timeout-s", type=float, default=60.0, help="seconds per attempt")
    chat("--retries", type=int, default=2, help="further attempts after a failure that may pass")
    chat("--retry-backoff-s", type=float, default=0.5, help="first wait, doubled each retry")
    chat("--max-tokens", type=int, default=100, help="the answer's length limit")
    chat("--api-key-env", default="OPENAI_API_KEY", help="the variable holding an API key")
    chat("--usd-per-mtok-in", type=float, help="price per million prompt tokens (cost field)")
    chat("--usd-per-mtok-out", type=float, help="price per million completion tokens")
    ce = parser.add_argument_group("--judge cross_encoder or similarity").add_argument
    ce("--thresholds", help="score thresholds, one per grade above 0, ascending: T1[,T2,...]")
    ce("--calibration", type=Path, help="a calibration.json whose thresholds to use")
    ce("--batch-size", type=int, default=32)
    ce(
        "--max-length",
        type=int,
        help="tokens a pair is cut to (default 512, or the model's own limit where lower)",
    )
    ce("--device", action="append", dest="devices", help="cpu (default), cuda:N; repeatable")


def _thresholds(args: argparse.Namespace, scale: Sequence[int]) -> list[float] | None:
    """The cross-encoder's thresholds from --thresholds or --calibration (None: none given)."""
    if args.thresholds is not None and args.calibration is not None:
        raise ConfigError("--thresholds", "give --thresholds or --calibration, not both")
    if args.calibration is not None:
        path = (
            args.calibration / CALIBRATION_JSON if args.calibration.is_dir() else args.calibration
        )
        try:
            values = json.loads(path.read_text(encoding="utf-8"))["judge"]["thresholds"]
            values = [float(v) for v in values]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(
                "--calibration", f"{path}: not a cross-encoder's calibration.json ({exc!r})"
            ) from None
        check_thresholds(values, scale, "--calibration", cli_key)
        return values
    if args.thresholds is None:
        return None
    try:
        return [float(part) for part in args.thresholds.split(",") if part.strip()]
    except ValueError:
        raise ConfigError("--thresholds", f"{args.thresholds!r}: not numbers") from None


def judge_of(args: argparse.Namespace, scale: Sequence[int], need_thresholds: bool) -> Judge:
    """The judge the flags describe."""
    chat = ChatSettings(
        url=args.url or "",
        model=args.model,
        concurrency=args.concurrency,
        timeout_s=args.timeout_s,
        retries=args.retries,
        retry_backoff_s=args.retry_backoff_s,
        max_tokens=args.max_tokens,
        api_key_env=args.api_key_env,
        usd_per_mtok_in=args.usd_per_mtok_in,
        usd_per_mtok_out=args.usd_per_mtok_out,
    )
    spec = JudgeSpec(
        kind=args.judge,
        chat=chat,
        relevant_from=args.relevant_from,
        prompt_en=args.prompt_en,
        prompt_zh=args.prompt_zh,
        thresholds=_thresholds(args, scale),
        batch_size=args.batch_size,
        max_length=args.max_length,
        devices=args.devices or ["cpu"],
    )
    return build_judge(spec, scale, need_thresholds)


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
