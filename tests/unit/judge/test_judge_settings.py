"""One judge settings type drives both the monthly job's `benchmark.judge` node and
`python -m run.judge`'s command line: every field is a key of the node and a flag of the
command, and the same values read either way are the same settings."""

from __future__ import annotations

import dataclasses

from retrieval_bench.config import RunConfig
from retrieval_bench.config.benchmark import BenchmarkJudgeConfig
from retrieval_bench.config.judge import JudgeSettings, judge_flag
from retrieval_bench.judge.build import chat_settings
from run.judge import _parser, judge_settings

FIELDS = [f.name for f in dataclasses.fields(JudgeSettings)]


def test_every_setting_is_a_key_of_the_node_and_a_flag_of_the_command() -> None:
    node = dataclasses.asdict(RunConfig().benchmark.judge)
    assert set(node) == {*FIELDS, "depth"}
    flags = {flag for action in _parser()._actions for flag in action.option_strings}
    assert {judge_flag(name) for name in FIELDS} <= flags
    assert judge_flag("kind") == "--judge" and judge_flag("timeout_s") == "--timeout-s"


def test_the_same_settings_read_either_way_are_the_same() -> None:
    argv = [
        "pool.jsonl", "--judge", "openai", "--model", "qwen", "--url", "http://127.0.0.1:9/v1",
        "--grades", "0,1,2,3", "--timeout-s", "12.5", "--retries", "4", "--max-tokens", "50",
        "--usd-per-mtok-in", "0.2", "--prompt-zh", "zh.txt",
    ]  # fmt: skip
    from_flags = judge_settings(_parser().parse_args(argv))
    node = BenchmarkJudgeConfig(
        kind="openai", model="qwen", url="http://127.0.0.1:9/v1", grades=[0, 1, 2, 3],
        timeout_s=12.5, retries=4, max_tokens=50, usd_per_mtok_in=0.2, prompt_zh="zh.txt",
    )  # fmt: skip
    assert {name: getattr(from_flags, name) for name in FIELDS} == {
        name: getattr(node, name) for name in FIELDS
    }
    assert chat_settings(from_flags) == chat_settings(node)
    scored = ["pool.jsonl", "--judge", "cross_encoder", "--model", "m", "--thresholds", "0.5",
              "--device", "cpu", "--device", "cpu", "--max-length", "128"]  # fmt: skip
    spec = judge_settings(_parser().parse_args(scored))
    assert (spec.thresholds, spec.devices, spec.max_length) == ([0.5], ["cpu", "cpu"], 128)
