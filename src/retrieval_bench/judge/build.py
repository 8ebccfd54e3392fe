"""A judge from its settings, whoever gives them: `python -m run.judge`'s flags or the monthly
job's `benchmark.judge` node. A bad or missing setting is a ConfigError naming it as the
caller spells it (`key`: `--url`, or `benchmark.judge.url`)."""

from __future__ import annotations

from collections.abc import Sequence

from retrieval_bench.config.judge import JUDGES, SCORE_JUDGES, JudgeSettings
from retrieval_bench.errors import ConfigError
from retrieval_bench.judge.base import Judge, Key, cli_key, scale_mapping
from retrieval_bench.judge.chat import ChatSettings
from retrieval_bench.judge.prompt import load_prompt


def chat_settings(settings: JudgeSettings) -> ChatSettings:
    """The chat judge's endpoint settings (its `url` empty for a scored judge)."""
    return ChatSettings(
        url=settings.url,
        model=settings.model,
        concurrency=settings.concurrency,
        timeout_s=settings.timeout_s,
        retries=settings.retries,
        retry_backoff_s=settings.retry_backoff_s,
        max_tokens=settings.max_tokens,
        api_key_env=settings.api_key_env,
        usd_per_mtok_in=settings.usd_per_mtok_in,
        usd_per_mtok_out=settings.usd_per_mtok_out,
    )


def check_thresholds(values: Sequence[float], scale: Sequence[int], flag: str, key: Key) -> None:
    """One threshold per grade above 0 of a 0..M scale, ascending."""
    top = max(scale)
    if tuple(scale) != tuple(range(top + 1)):
        raise ConfigError(key("grades"), f"a cross-encoder needs a scale 0..M, got {list(scale)}")
    if len(values) != top:
        raise ConfigError(
            flag, f"needs {top} threshold(s) for the scale {list(scale)}, got {list(values)}"
        )
    if list(values) != sorted(values):
        raise ConfigError(flag, f"thresholds must ascend, got {list(values)}")


def build_judge(
    spec: JudgeSettings, scale: Sequence[int], need_thresholds: bool, key: Key = cli_key
) -> Judge:
    """The judge `spec` describes (a `benchmark.judge` node or `run.judge`'s flags, one type):
    the one place a setting is read into the judge. A scored judge without thresholds is
    refused when `need_thresholds` (judging; calibration chooses them)."""
    thresholds = list(spec.thresholds) or None
    if spec.kind not in JUDGES:
        raise ConfigError(key("kind"), f"unknown judge {spec.kind!r}: {' or '.join(JUDGES)}")
    if not spec.model.strip():
        raise ConfigError(key("model"), f"the {spec.kind} judge needs a model")
    if spec.kind == "openai":
        from retrieval_bench.judge.chat import ChatJudge

        if thresholds is not None:
            raise ConfigError(
                key("thresholds"), f"applies to the {' and '.join(SCORE_JUDGES)} judges only"
            )
        if not spec.url:
            raise ConfigError(key("url"), "the openai judge needs its endpoint's URL")
        to_scale = scale_mapping(scale, spec.relevant_from, key)
        prompts = {
            "en": load_prompt("en", spec.prompt_en or None, key("prompt_en")),
            "zh": load_prompt("zh", spec.prompt_zh or None, key("prompt_zh")),
        }
        return ChatJudge(chat_settings(spec), prompts, to_scale, key)
    if spec.url:
        raise ConfigError(key("url"), "applies to the openai judge only")
    for name in ("prompt_en", "prompt_zh"):
        if getattr(spec, name):
            raise ConfigError(key(name), "applies to the openai judge only")
    if thresholds is not None:
        check_thresholds(thresholds, scale, key("thresholds"), key)
    elif need_thresholds:
        raise ConfigError(
            key("thresholds"),
            f"a {spec.kind} judge's scores need thresholds to become grades (one per grade "
            "above 0); `python -m run.judge --calibrate` chooses them against people's labels",
        )
    from retrieval_bench.judge.cross_encoder import CrossEncoderJudge
    from retrieval_bench.judge.similarity import SimilarityJudge

    if spec.kind == "similarity":
        judge_class: type[CrossEncoderJudge | SimilarityJudge] = SimilarityJudge
        own: dict[str, str] = {}
    else:
        judge_class, own = CrossEncoderJudge, {"length_key": key("max_length")}
    return judge_class(
        spec.model,
        thresholds,
        batch_size=spec.batch_size,
        max_length=spec.max_length,
        devices=list(spec.devices),
        model_key=key("model"),
        **own,
    )
