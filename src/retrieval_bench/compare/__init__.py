"""Comparison across finished job folders: per-type verdicts, ablations, bad cases.

Kept import-light (no scipy here) because `retrieval_bench.config` imports the config schema and
Hydra instantiates the sweep callback in every job process.
"""
