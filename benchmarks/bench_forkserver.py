"""A README command in a fresh interpreter against the same command forked from one that has
imported the app (the tests' `python`, tests/support/forkserver.py), side by side in one run.

    .venv/bin/python benchmarks/bench_forkserver.py              # 5 interleaved rounds
    .venv/bin/python benchmarks/bench_forkserver.py --rounds 1
    .venv/bin/python benchmarks/bench_forkserver.py --model      # and a model-loading command

Why: the app-level tests start `python -m run ...` again and again (82 README commands, and
every `run_app`); what a start costs before the job does anything is paid each time. Each round
runs `python -m run retriever=bm25` (the shipped travel set, caches warm) both ways through
bash, as the README test does, and asserts both exit 0 with the same metrics.json. `--model`
adds `python -m run retriever=m3 arms.m3.model=DIR` (a tiny random BGE-M3, support/random_models.py)
into an empty cache, as the README runs it first, against a server that also preloads
FlagEmbedding, as the README test's does: encoding, it imports torch and transformers. Each
server's own start (paid once per server) is printed beside it.
RESULT: the fresh command's median wall time over the forked one's, per command.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.forkserver import forked_python, shim_script
from timing import add_rounds, timed

ROOT = Path(__file__).resolve().parents[1]
BM25 = "python -m run retriever=bm25 hydra.run.dir={out}"
M3 = "python -m run retriever=m3 arms.m3.model={model} hydra.run.dir={out} cache_dir={out}/cache"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_rounds(parser, 5)
    parser.add_argument(
        "--model", action="store_true", help="also a model-loading command (tiny BGE-M3)"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-fork-") as scratch_name:
        scratch = Path(scratch_name)
        _compare("forkserver", BM25, (), args.rounds, scratch / "bm25")
        if args.model:
            from support.random_models import build_random_bge_m3

            model = scratch / "bge-m3"
            model.mkdir()
            build_random_bge_m3(model)
            command = M3.replace("{model}", str(model))
            _compare("forkserver_model", command, ("FlagEmbedding",), args.rounds, scratch / "m3")
    return 0


def _compare(name: str, command: str, preload: tuple[str, ...], rounds: int, scratch: Path) -> None:
    """`command` ({out}: its job folder) both ways, interleaved; prints the RESULT line."""
    bins = {"fresh": scratch / "fresh-bin", "forked": scratch / "forked-bin"}
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HYDRA_FULL_ERROR": "0", "HF_HUB_OFFLINE": "1"}
    shims = {"fresh": shim_script([sys.executable])}
    with contextlib.ExitStack() as stack:
        server = forked_python(env, ROOT, fresh=False, preload=preload)
        python, server_start = timed(lambda: stack.enter_context(server))
        shims["forked"] = shim_script(python)
        for how, folder in bins.items():
            folder.mkdir(parents=True)
            (folder / "python").write_text(shims[how])
            (folder / "python").chmod(0o755)
        times: dict[str, list[float]] = {how: [] for how in bins}
        for round_ in range(rounds + 1):  # round 0 warms the caches for both
            metrics = {}
            for how, folder in bins.items():
                out = scratch / f"{how}-{round_}"
                path_env = {**env, "PATH": f"{folder}{os.pathsep}{env['PATH']}"}
                run = functools.partial(
                    subprocess.run,
                    ["bash", "-c", command.format(out=out)],
                    cwd=scratch,
                    env=path_env,
                    capture_output=True,
                    text=True,
                )
                done, seconds = timed(run)
                assert done.returncode == 0, f"{how}: exit {done.returncode}\n{done.stderr[-2000:]}"
                metrics[how] = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
                if round_:
                    times[how].append(seconds)
            assert metrics["fresh"] == metrics["forked"], "forked and fresh metrics.json differ"
    fresh, forked = (statistics.median(times[how]) for how in ("fresh", "forked"))
    shown = command.format(out="DIR").replace(str(scratch.parent), "...")
    print(f"{rounds} round(s), median s of `{shown}` through bash")
    print(f"fresh interpreter {fresh:.2f}  forked {forked:.2f}  saved {fresh - forked:.2f} s")
    preloaded = f", and {', '.join(preload)}" if preload else ""
    print(
        f"the server's start (its imports{preloaded}, paid once per server): {server_start:.2f} s"
    )
    print(
        f"RESULT {name}: {fresh:.2f} s fresh / {forked:.2f} s forked = {fresh / forked:.2f}x "
        "(same metrics.json)"
    )


if __name__ == "__main__":
    sys.exit(main())
