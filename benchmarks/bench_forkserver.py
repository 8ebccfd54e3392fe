"""A README command in a fresh interpreter against the same command forked from one that has
imported the app (the tests' `python`, tests/support/forkserver.py), side by side in one run.

    .venv/bin/python benchmarks/bench_forkserver.py              # 5 interleaved rounds
    .venv/bin/python benchmarks/bench_forkserver.py --rounds 1

Why: the app-level tests start `python -m run ...` again and again (82 README commands, and
every `run_app`); what a start costs before the job does anything is paid each time. Each round
runs `python -m run retriever=bm25` (the shipped travel set, caches warm) both ways through
bash, as the README test does, and asserts both exit 0 with the same metrics.json. The
server's own start (paid once per server) is printed beside it.
RESULT: the fresh command's median wall time over the forked one's.
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
COMMAND = "python -m run retriever=bm25 hydra.run.dir={out}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_rounds(parser, 5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-fork-") as scratch:
        return _run(args.rounds, Path(scratch))


def _run(rounds: int, scratch: Path) -> int:
    bins = {"fresh": scratch / "fresh-bin", "forked": scratch / "forked-bin"}
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HYDRA_FULL_ERROR": "0"}
    shims = {"fresh": shim_script([sys.executable])}
    with contextlib.ExitStack() as stack:
        server = forked_python(env, ROOT, fresh=False)
        python, server_start = timed(lambda: stack.enter_context(server))
        shims["forked"] = shim_script(python)
        for how, folder in bins.items():
            folder.mkdir()
            (folder / "python").write_text(shims[how])
            (folder / "python").chmod(0o755)
        times: dict[str, list[float]] = {how: [] for how in bins}
        for round_ in range(rounds + 1):  # round 0 warms the caches for both
            metrics = {}
            for how, folder in bins.items():
                out = scratch / f"{how}-{round_}"
                command = COMMAND.format(out=out)
                path_env = {**env, "PATH": f"{folder}{os.pathsep}{env['PATH']}"}
                run = functools.partial(
                    subprocess.run,
                    ["bash", "-c", command],
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
    print(f"{rounds} round(s), median s of `{COMMAND.format(out='DIR')}` through bash")
    print(f"fresh interpreter {fresh:.2f}  forked {forked:.2f}  saved {fresh - forked:.2f} s")
    print(f"the server's start (its imports, paid once per server): {server_start:.2f} s")
    print(
        f"RESULT forkserver: {fresh:.2f} s fresh / {forked:.2f} s forked = {fresh / forked:.2f}x "
        "(same metrics.json)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
