"""ARCHITECTURE.md's "Write a plug-in" recipe: its YAML is the shipped BM25 arm's node under a
new name (so the recipe cannot drift from the schema), and, put in a config folder of one's own,
it runs as an outside arm beside the shipped one, scoring as the shipped arm does with b=0."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, mini_overrides, run_in_process

from retrieval_bench.config.schema import BUILTIN_ARMS


def recipe() -> dict[str, object]:
    """The YAML block of ARCHITECTURE.md's "Write a plug-in" section."""
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    section = text.split("## Write a plug-in", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```yaml\n(.*?)```", section, re.DOTALL)
    assert block, "ARCHITECTURE.md's Write a plug-in section has no yaml block"
    assert block.group(1).startswith("# @package _global_\n")
    document = yaml.safe_load(block.group(1))
    assert isinstance(document, dict)
    return document


def test_the_recipe_is_the_shipped_bm25_node_copied() -> None:
    node = recipe()["arms"]["bm25_flat"]  # type: ignore[index]
    assert node == {**BUILTIN_ARMS["bm25"], "b": 0.0}


@pytest.mark.slow  # whole jobs in process
def test_the_copied_arm_runs_from_a_config_folder_of_ones_own(tmp_path: Path) -> None:
    folder = tmp_path / "conf" / "experiment"
    folder.mkdir(parents=True)
    section = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8").split("## Write a plug-in")[1]
    block = re.search(r"```yaml\n(.*?)```", section, re.DOTALL)
    assert block
    (folder / "bm25_flat.yaml").write_text(block.group(1), encoding="utf-8")
    searchpath = f"hydra.searchpath=[file://{tmp_path / 'conf'}]"
    result, _ = run_in_process(
        [*mini_overrides(tmp_path), searchpath, "experiment=bm25_flat"], tmp_path / "copied"
    )
    assert list(result.metrics["stages"])[:3] == ["bm25", "bm25_flat", "fused"]
    flat, _ = run_in_process(
        [*mini_overrides(tmp_path), "retriever=bm25", "arms.bm25.b=0.0"], tmp_path / "flat"
    )
    for copied, shipped in zip(result.records, flat.records, strict=True):
        assert copied.stages["bm25_flat"].ids == shipped.stages["bm25"].ids
        assert copied.stages["bm25_flat"].scores == shipped.stages["bm25"].scores
