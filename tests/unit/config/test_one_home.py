"""`python -m run --cfg job` shows each setting once (issue 36): no key of the composed default
config is an old spelling, every shipped plug-in node holds exactly its class's keyword
arguments, a key that reads another key is a shipped variant following its base's same
keyword (a default, not a second home), and no typed node of the schema holds a plug-in's
settings beside its node. A test fails when two keys would set one field."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from omegaconf import OmegaConf

from retrieval_bench.config.compose import compose_dict
from retrieval_bench.config.model import ModelConfig
from retrieval_bench.config.renamed import rename_key
from retrieval_bench.config.schema import AFTER, SETTINGS, RunConfig
from retrieval_bench.config.targets import CUT

PLUGIN_GROUPS = ("arms", "combiners", "stages")
# A shipped node that follows a node of another class: fill's rank constant follows RRF's, the
# real Lucene's k1 and b the BM25 arm's (the formula they share).
ACROSS_CLASSES = {"combiners.fill.k", "arms.lucene.k1", "arms.lucene.b"}


def _leaves(node: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(node, dict) and node:
        for key, value in node.items():
            yield from _leaves(value, f"{prefix}{key}.")
    else:
        yield prefix[:-1], node


def _raw() -> dict[str, Any]:
    """The default config as `--cfg job` prints it: interpolations kept."""
    raw = OmegaConf.to_container(compose_dict([]), resolve=False)
    assert isinstance(raw, dict)
    return raw


def _fields(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls) if f.init}  # type: ignore[arg-type]


def test_no_key_of_the_default_config_is_an_old_spelling() -> None:
    assert [key for key, _ in _leaves(_raw()) if rename_key(key)] == []


def test_every_shipped_plugin_node_holds_exactly_its_classs_keywords() -> None:
    raw = _raw()
    for group in PLUGIN_GROUPS:
        for name, node in raw[group].items():
            target = node["_target_"]
            expected = _fields(SETTINGS[target]) if target != CUT else set()
            assert set(node) - {"_target_", AFTER} == expected, f"{group}.{name}"


def test_a_key_that_reads_another_follows_the_same_keyword_of_a_node_of_its_class() -> None:
    """`arms.bm25_nohmm.k1: ${arms.bm25.k1}`: the variant's own k1, defaulting to its base's;
    the one key that reads a typed node is the rerank depth's default, retriever.pool_size."""
    raw = _raw()
    reads = {key: value for key, value in _leaves(raw) if isinstance(value, str) and "${" in value}
    assert reads, "the shipped variants follow their bases by interpolation"
    for key, value in reads.items():
        target_key = value.removeprefix("${").removesuffix("}")
        if key == "stages.rerank.depth":
            assert target_key == "retriever.pool_size"
            continue
        group, name, keyword = key.split(".", 2)
        base_group, base, base_keyword = target_key.split(".", 2)
        assert (base_group, base_keyword) == (group, keyword), key
        classes = {raw[group][name]["_target_"], raw[group][base]["_target_"]}
        assert len(classes) == 1 or key in ACROSS_CLASSES, key
        assert not isinstance(raw[group][base][keyword], str) or "${" not in str(
            raw[group][base][keyword]
        ), f"{key} reads {target_key}, which reads another key: one base per setting"


def test_no_typed_node_holds_a_plugins_settings_beside_its_node() -> None:
    """Only the model keys (`ModelConfig`, one shape shared by the encoder, BGE-M3 and the
    reranker) may appear in both a typed node and a plug-in's settings."""
    shared = _fields(ModelConfig)

    defaults = RunConfig()
    nodes = [
        type(getattr(defaults, f.name))
        for f in dataclasses.fields(RunConfig)
        if dataclasses.is_dataclass(getattr(defaults, f.name))
    ]
    assert nodes, "RunConfig has typed nodes"
    for settings in set(SETTINGS.values()):
        own = _fields(settings) - shared
        for node in nodes:
            assert not issubclass(node, settings), (node, settings)
            overlap = own & _fields(node)
            # Field names such as `name` or `seed` recur with other meanings; a plug-in's
            # settings class never may be a typed node's, nor may most of its own keys.
            assert len(overlap) < max(2, len(own)), (node.__name__, settings.__name__, overlap)
