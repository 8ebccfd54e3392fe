"""`python -m run`: the Hydra app. Config -> objects -> one job; nothing else lives here."""

from __future__ import annotations

import logging
import sys
from typing import Any, cast

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from retrieval_bench.config import RunConfig, register_configs, validate
from retrieval_bench.errors import BenchError
from retrieval_bench.experiment import run_job
from retrieval_bench.outputs import write_job
from retrieval_bench.reports.console import job_summary

register_configs()
log = logging.getLogger("run")


@hydra.main(version_base="1.3", config_path="../../conf", config_name="config")
def main(dict_cfg: DictConfig) -> float | None:
    cfg: RunConfig = OmegaConf.to_object(dict_cfg)  # type: ignore[assignment]
    try:
        validate(cfg)
        if cfg.benchmark.enabled:  # python -m run experiment=monthly: the benchmark driver
            from retrieval_bench.benchmark.driver import run_from_hydra

            sys.exit(run_from_hydra(cfg))
        result = run_job(cfg)
        job_dir = write_job(
            HydraConfig.get().runtime.output_dir,
            result,
            cast(dict[str, Any], OmegaConf.to_container(dict_cfg, resolve=True)),
        )
    except BenchError as exc:
        log.debug("job failed", exc_info=True)  # the job's log file keeps the traceback
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    print(job_summary(result, cfg.top_k, job_dir))
    return result.metrics["stages"]["final"]["overall"].get(f"ndcg@{cfg.top_k}")


if __name__ == "__main__":
    main()
