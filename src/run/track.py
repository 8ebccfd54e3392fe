"""`python -m run.track`: finished folders logged to MLflow, and what the tracker holds.

    python -m run.track sync FOLDER [FOLDER ...] [--uri URI] [--experiment NAME]
    python -m run.track ls [DATASET] [--uri URI]

`sync` logs job, sweep, benchmark month and tuning folders made earlier or while the tracker
was down (a backfill); a folder logged before is found again by its key and completed or left
as it is, never logged twice. `ls` lists the runs the tracker holds for a dataset's
experiment (every experiment when none is named). `--uri` and `--experiment` default to the
`tracking.uri` and `tracking.experiment` the folders' jobs ran with (else tracking=mlflow's
defaults: the default store, each dataset's name). `serve` is the live logger a job
or sweep starts (run.tracking), not a command for people.

Exit codes: 0 ok; 1 (serve) something was not logged; 2 bad input (a folder that is not a
finished job, sweep, month or tuning; a tracking URI that does not answer or is malformed; an
experiment the tracker refuses); 3 internal error.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from retrieval_bench.config.tracking import TrackingConfig
from retrieval_bench.errors import EXIT_BAD_INPUT, EXIT_OK, ConfigError
from run.exits import guarded


def main(argv: Sequence[str] | None = None) -> int:
    return guarded(lambda: _main(argv))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m run.track",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sync = sub.add_parser("sync", help="log finished folders (jobs, sweeps, months, tunings)")
    sync.add_argument("folders", nargs="+", type=Path)
    ls = sub.add_parser("ls", help="list the runs the tracker holds")
    ls.add_argument("dataset", nargs="?", default="", help="its experiment (default: all)")
    serve = sub.add_parser("serve", help=argparse.SUPPRESS)
    serve.add_argument("--sweep", type=Path)
    serve.add_argument("--dataset", default="")
    serve.add_argument("--parent-run-id", default="")
    serve.add_argument("--new-folder", action="store_true")
    for each in (sync, ls, serve):
        each.add_argument("--uri", help="MLflow tracking URI (default: the folders' tracking.uri)")
        each.add_argument("--experiment", default="", help="default: each dataset's name")
        each.add_argument(
            "--timeout",
            type=int,
            default=TrackingConfig.timeout_s,
            help="seconds per request to a tracking server",
        )
    return parser


def _main(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)
    recorded = _recorded(getattr(args, "folders", []))
    cfg = TrackingConfig(
        kind="mlflow",
        uri=args.uri or str(recorded.get("uri") or TrackingConfig.uri),
        experiment=args.experiment or str(recorded.get("experiment") or ""),
        timeout_s=args.timeout,
    )
    cfg.validate()
    if args.command == "serve":
        return _serve(args, cfg)
    from retrieval_bench.tracking.store import check_reachable

    check_reachable(cfg)
    if args.command == "sync":
        return _sync(args.folders, cfg)
    return _ls(args.dataset, cfg)


def _recorded(folders: Sequence[Path]) -> dict[str, Any]:
    """The `tracking:` node the folders' jobs ran with when they ran with tracking=mlflow (the
    defaults of --uri and --experiment), else {}."""
    from retrieval_bench.jobdir.files import read_yaml
    from retrieval_bench.jobdir.names import HYDRA_CONFIG
    from retrieval_bench.jobdir.read import find_job_dirs

    for folder in folders:
        for job_dir in find_job_dirs(folder) if folder.is_dir() else []:
            node = (read_yaml(job_dir / HYDRA_CONFIG) or {}).get("tracking") or {}
            if node.get("kind") == "mlflow":
                return dict(node)
    return {}


def _sync(folders: Sequence[Path], cfg: TrackingConfig) -> int:
    from retrieval_bench.tracking.sync import sync_folders

    synced = sync_folders(folders, cfg)
    for line in synced.lines:
        print(line, flush=True)
    print(f"tracking: {len(synced.runs)} runs in {cfg.uri}")
    return EXIT_OK


def _ls(dataset: str, cfg: TrackingConfig) -> int:
    from retrieval_bench.tracking.listing import list_runs

    for line in list_runs(cfg, dataset):
        print(line)
    return EXIT_OK


def _serve(args: argparse.Namespace, cfg: TrackingConfig) -> int:
    from retrieval_bench.tracking.sync import serve

    def say(line: str) -> None:
        print(line, flush=True)

    try:
        code = serve(
            cfg,
            sys.stdin,
            say,
            args.sweep,
            args.dataset,
            args.parent_run_id or None,
            args.new_folder,
        )
    except ConfigError as exc:
        say(f"refused {exc}")
        code = EXIT_BAD_INPUT
    # Everything is logged and said; the job or sweep waits for this last line (not for this
    # process's end, which unmaps a few hundred MB), and the process ends now, not after
    # tearing down the two thousand modules MLflow imported (0.4 s).
    say(f"exit {code}")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
