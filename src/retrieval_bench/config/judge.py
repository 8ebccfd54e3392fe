"""A model judge's settings, one type for every caller: the monthly job's `benchmark.judge` node
(`BenchmarkJudgeConfig` adds the pool depth) and `python -m run.judge`'s command line, whose
flags are generated from these fields (`run.typed_options`): `--url` is `url`, `--timeout-s`
is `timeout_s`; a field names another flag in its metadata (`kind` is `--judge`, `devices` the
repeatable `--device`). `judge.build.build_judge` reads them, once, for both.

Only plain typed fields; imports nothing heavy."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from retrieval_bench.config.typed import field_flag

# What judges a pool's pairs: a chat model behind an OpenAI-compatible endpoint, a cross-encoder
# cut at thresholds, or the cosine of an encoder's vectors cut the same way.
JUDGES = ("openai", "cross_encoder", "similarity")
# The judges whose grades are a score cut at thresholds.
SCORE_JUDGES = ("cross_encoder", "similarity")
# `metadata["judges"]`: the judges a field applies to (the command's help groups them so).
OPENAI = "openai"
SCORED = "cross_encoder, similarity"


@dataclass
class JudgeSettings:
    """Which judge, its model, the grade scale, and each kind's own settings (a setting of
    another kind's must stay unset: `judge.build.build_judge` refuses it naming its key)."""

    kind: str = field(default="none", metadata={"flag": "--judge", "choices": ("none", *JUDGES)})
    """The judge: `openai` (a chat model behind an OpenAI-compatible API), `cross_encoder` (a
    cross-encoder's score cut at thresholds), `similarity` (an encoder's cosine, cut so);
    `none`: no judge."""
    model: str = ""
    """openai: the model's name; cross_encoder: its folder; similarity: use or a folder."""
    grades: list[int] = field(default_factory=lambda: [0, 1])
    """The evaluation set's grade scale: 0,1 or 0,1,2,3."""
    url: str = field(default="", metadata={"judges": OPENAI})
    """openai: the API's base (http://HOST:PORT/v1) or its /chat/completions URL."""
    relevant_from: int = field(default=2, metadata={"judges": OPENAI})
    """openai, on a 0/1 grade scale: the 0-3 grade of the model's answer from which a pair is
    relevant."""
    prompt_en: str = field(default="", metadata={"judges": OPENAI})
    """openai: an English prompt file instead of the shipped one."""
    prompt_zh: str = field(default="", metadata={"judges": OPENAI})
    """openai: a Chinese prompt file instead of the shipped one."""
    concurrency: int = field(default=8, metadata={"judges": OPENAI})
    """openai: requests in flight at once."""
    timeout_s: float = field(default=60.0, metadata={"judges": OPENAI})
    """openai: seconds each attempt may take."""
    retries: int = field(default=2, metadata={"judges": OPENAI})
    """openai: further attempts after a failure that may pass (a timeout, a 429, a 5xx)."""
    retry_backoff_s: float = field(default=0.5, metadata={"judges": OPENAI})
    """openai: the first wait before a retry, doubled each time."""
    max_tokens: int = field(default=100, metadata={"judges": OPENAI})
    """openai: the answer's length limit."""
    api_key_env: str = field(default="OPENAI_API_KEY", metadata={"judges": OPENAI})
    """openai: the environment variable holding the API key (never the key itself)."""
    usd_per_mtok_in: float | None = field(default=None, metadata={"judges": OPENAI})
    """openai: the price per million prompt tokens, for the cost field; null: not priced."""
    usd_per_mtok_out: float | None = field(default=None, metadata={"judges": OPENAI})
    """openai: the price per million completion tokens; null: not priced."""
    thresholds: list[float] = field(default_factory=list, metadata={"judges": SCORED})
    """cross_encoder, similarity: score thresholds, one per grade above 0, ascending (`python
    -m run.judge --calibrate` chooses them); empty: none given."""
    batch_size: int = field(default=32, metadata={"judges": SCORED})
    """cross_encoder, similarity: pairs (or texts) scored per batch (memory, not results)."""
    max_length: int | None = field(default=None, metadata={"judges": SCORED})
    """cross_encoder: the tokens a pair is cut to; null: 512, or the model's own limit where
    that is lower."""
    devices: list[str] = field(
        default_factory=lambda: ["cpu"],
        metadata={"judges": SCORED, "flag": "--device", "repeat": True},
    )
    """cross_encoder, similarity: where the model runs (cpu, cuda:N), one worker per entry."""

    @property
    def enabled(self) -> bool:
        return self.kind != "none"


def judge_flag(name: str) -> str:
    """The command-line flag of the setting `name` (`--timeout-s` for timeout_s; a field's
    metadata may name another: `--judge` for kind)."""
    found = {f.name: f for f in fields(JudgeSettings)}.get(name)
    return field_flag(found) if found is not None else "--" + name.replace("_", "-")
