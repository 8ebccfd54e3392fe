"""Datasets: passages, entity lexicon and evaluation set, validated up front."""
