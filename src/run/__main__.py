"""`python -m run`: the Hydra app. Config -> objects -> one job; nothing else lives here.

Exit codes (run.exits): 0 ok, 1 regression (monthly gate), 2 bad input or config (Hydra's own
override errors included, and a job that scored nothing), 3 internal error, 130 interrupted,
143 terminated (SIGTERM, handled as Ctrl-C).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from retrieval_bench.config import RunConfig, register_configs
from retrieval_bench.config.compose import typed_config
from retrieval_bench.config.renamed import (
    announce,
    from_environment,
    rewrite_overrides,
    to_environment,
)
from retrieval_bench.encoders.shards import MissingShards
from retrieval_bench.errors import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    BenchError,
    InternalError,
    NothingScored,
    environment_fault,
    interrupt_leaves,
    stopped_how,
)
from retrieval_bench.io.claims import claim_new_dir, release_unused_claims
from retrieval_bench.job.check import check_config
from retrieval_bench.job.runner import run_job, run_shard_job
from retrieval_bench.jobdir import names
from retrieval_bench.jobdir.marker import RUNNING, mark_unfinished
from retrieval_bench.jobdir.write import write_job
from retrieval_bench.paths import PROJECT_ROOT, resolve_output
from retrieval_bench.reports.console import job_line, job_summary
from run.exits import JobFailed, die_with_parent, guarded, log_traceback, stop_signals
from run.slurm import slurm_fit

if TYPE_CHECKING:
    from run.tracking import LiveLogger

register_configs()
# conf/config.yaml's job folders; cached, so each folder is claimed once per job.
OmegaConf.register_new_resolver("new_dir", claim_new_dir, use_cache=True, replace=True)
atexit.register(release_unused_claims)
# conf/hydra/launcher/slurm.yaml's CPUs and memory, capped to the cluster's largest node.
OmegaConf.register_new_resolver("slurm_fit", slurm_fit, use_cache=True, replace=True)
log = logging.getLogger("run")

_FULL_ERROR = "HYDRA_FULL_ERROR"
# The exit code a task asks for (the monthly gate's 0 or 1): Hydra's main returns nothing.
_exit_code = [EXIT_OK]
# HYDRA_FULL_ERROR as the user set it (None: not set; unknown outside main()).
_user_full_error: list[str | None] = []


# An absolute path: Hydra finds it whether this module runs as __main__ or is imported.
@hydra.main(version_base="1.3", config_path=str(PROJECT_ROOT / "conf"), config_name="config")
def hydra_main(dict_cfg: DictConfig) -> float | None:
    try:
        # Also where a launcher runs the job in a worker process of its own (joblib).
        with stop_signals():
            return _task(dict_cfg)
    except Exception as exc:
        if HydraConfig.get().mode == RunMode.RUN:
            # Straight to main(): Hydra would add its own "Error executing job" line.
            raise JobFailed(exc) from exc
        raise  # a sweep's other jobs still run; Hydra names the failed job's overrides


def _task(dict_cfg: DictConfig) -> float | None:
    with _user_environment():
        cfg = typed_config(dict_cfg)
        check_config(cfg)
        if cfg.tracking.enabled and HydraConfig.get().mode == RunMode.RUN:
            # A sweep's callback checked it once (run.tracking.TrackingCallback).
            from retrieval_bench.tracking.store import check_reachable

            check_reachable(cfg.tracking)
        if cfg.benchmark.enabled:  # python -m run experiment=monthly: the benchmark driver
            from run.monthly import run_from_hydra

            _exit_code[0] = run_from_hydra(cfg)
            return None
        if cfg.encoder.shard_only is not None:  # one job of a sharded encode: no retrieval
            shard = run_shard_job(cfg)
            print(
                f"{shard.dataset}: shard {shard.shard} of {shard.shards} ({shard.passages} "
                f"passages): encoded {shard.stats.encoded}, from cache {shard.stats.cached}"
            )
            return None
        return _job(cfg, OmegaConf.to_container(dict_cfg, resolve=True))  # type: ignore[arg-type]


def _job(cfg: RunConfig, config: dict[str, Any]) -> float | None:
    """One job into its folder, marked UNFINISHED until its last file is written (and with
    why, when it fails or is interrupted); with tracking, its logger starts with it."""
    if not cfg.tracking.enabled:
        return _run_job(cfg, config, None)
    from run.tracking import own_logger

    with own_logger(cfg.tracking) as logger:
        return _run_job(cfg, config, logger)


def _run_job(cfg: RunConfig, config: dict[str, Any], logger: LiveLogger | None) -> float | None:
    job_dir = Path(HydraConfig.get().runtime.output_dir)
    mark_unfinished(job_dir, RUNNING)
    try:
        with interrupt_leaves(f"job folder {job_dir} is unfinished (marked {names.UNFINISHED})"):
            try:
                result = run_job(cfg)
            except MissingShards as exc:  # its rerun command, from this job's own overrides
                raise exc.with_overrides(HydraConfig.get().overrides.task) from None
            write_job(job_dir, result, config, renamed_keys=from_environment())
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (run.exits.stop_signals)
        mark_unfinished(job_dir, stopped_how(exc))
        raise
    except BenchError as exc:
        _mark_failed(job_dir, f"failed: {exc}")
        raise
    except Exception as exc:
        fault = environment_fault(exc)  # the machine refused a write: named, exit 2
        if fault is not None:
            fault = fault.naming(_output_keys(cfg, job_dir))
            _mark_failed(job_dir, f"failed: {fault}")
            raise fault from exc
        where = log_traceback(exc)
        _mark_failed(job_dir, f"failed: internal error {type(exc).__name__} (see {where})")
        raise InternalError(exc, where) from exc
    hydra_cfg = HydraConfig.get()
    if hydra_cfg.mode == RunMode.MULTIRUN:  # one line per job; the sweep's comparison follows
        label = f"{hydra_cfg.job.num} {hydra_cfg.job.override_dirname}".strip()
        print(job_line(result, cfg.top_k, job_dir, label), flush=True)
    else:
        print(job_summary(result, cfg.top_k, job_dir))
    if cfg.tracking.enabled:  # the folder is complete: log it off this process
        from run.tracking import log_finished

        warning = log_finished(job_dir, cfg.tracking, logger)
        if warning:
            print(warning, file=sys.stderr, flush=True)
    _check_scored(result.metrics, job_dir)
    return result.metrics["stages"]["final"]["overall"].get(f"ndcg@{cfg.top_k}")


def _output_keys(cfg: RunConfig, job_dir: Path) -> dict[Path, str]:
    """The folders a job writes to, each with the setting that moves it."""
    run_dir = "hydra.sweep.dir" if HydraConfig.get().mode == RunMode.MULTIRUN else "hydra.run.dir"
    return {job_dir.resolve(): run_dir, resolve_output(cfg.cache_dir): "cache_dir"}


def _mark_failed(job_dir: Path, state: str) -> None:
    """Say why the job failed in its marker, as far as the folder lets (a full or read-only
    disk may not: the marker then still says `running`, which reads as interrupted once this
    process is gone)."""
    with contextlib.suppress(OSError):
        mark_unfinished(job_dir, state)


def _check_scored(metrics: dict[str, Any], job_dir: Path) -> None:
    """A job that scored no query at any stage measured nothing: its outputs stand (they say
    why), but it must not exit 0."""
    stages = metrics["stages"]
    if any(stage["counts"]["scored"] for stage in stages.values()):
        return
    excluded = stages["final"]["counts"].get("excluded") or {}
    reasons = ", ".join(f"{reason} {n}" for reason, n in excluded.items()) or "no queries"
    raise NothingScored(
        f"nothing was scored: every stage scored 0 queries (excluded: {reasons}); "
        f"outputs in {job_dir}"
    )


@contextlib.contextmanager
def _user_environment() -> Iterator[None]:
    """Inside a job, HYDRA_FULL_ERROR is what the user set (processes the job starts inherit
    it); main() sets it around Hydra only so that Hydra raises its errors instead of exiting."""
    if not _user_full_error:
        yield
        return
    _set_full_error(_user_full_error[0])
    try:
        yield
    finally:
        _set_full_error("1")


def _set_full_error(value: str | None) -> None:
    if value is None:
        os.environ.pop(_FULL_ERROR, None)
    else:
        os.environ[_FULL_ERROR] = value


def _run_hydra() -> int:
    _exit_code[0] = EXIT_OK
    die_with_parent()  # a benchmark month's sweep stops when its driver dies
    try:
        hydra_main()
    except SystemExit as exc:
        # Hydra's own usage errors (`--cfg job --package nope`, ...) exit 1 after printing
        # their message; 1 means a regression here.
        if exc.code == 1:
            return EXIT_BAD_INPUT
        raise
    return _exit_code[0]


def _rewrite_argv() -> int:
    """The command line's old key spellings read as their new homes (config.renamed), before
    Hydra parses it: one notice line per old key, handed to the jobs for their manifest."""
    from hydra._internal.utils import get_args_parser

    args, _ = get_args_parser().parse_known_args(sys.argv[1:])
    modes = [
        flag
        for flag, given in (
            ("--run", args.run),
            ("--multirun", args.multirun),
            (f"--cfg {args.cfg}", args.cfg),
            (f"--info {args.info}", args.info is not None),
            ("--shell-completion", args.shell_completion),
        )
        if given
    ]
    if len(modes) > 1:  # Hydra raises a bare ValueError for it, which would read as our bug
        raise BenchError(
            f"{' and '.join(modes)} cannot go together: give one of --run, --multirun (-m), "
            "--cfg, --info and --shell-completion (`--cfg job` shows one job's config: drop "
            "-m, or pick one value per swept key)"
        )
    given = list(args.overrides or [])
    notices = rewrite_overrides(given)[1]
    to_environment(notices)
    if not notices:
        return EXIT_OK
    announce(notices)
    argv, pending = [sys.argv[0]], list(given)
    for token in sys.argv[1:]:
        if pending and token == pending[0]:
            pending.pop(0)
            argv.extend(rewrite_overrides([token])[0])
        else:
            argv.append(token)
    sys.argv[:] = argv
    return EXIT_OK


def main() -> int:
    """Hydra's app with this package's exit codes (run.exits)."""
    code = guarded(_rewrite_argv)
    if code != EXIT_OK:
        return code
    _user_full_error[:] = [os.environ.get(_FULL_ERROR)]
    _set_full_error("1")
    try:
        return guarded(_run_hydra, full_traceback=_user_full_error[0] == "1")
    finally:
        _set_full_error(_user_full_error[0])
        _user_full_error.clear()


if __name__ == "__main__":
    sys.exit(main())
