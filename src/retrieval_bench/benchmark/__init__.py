"""The monthly benchmark job: dated runs, a regression gate against an earlier month, a trend.

Kept import-light: `retrieval_bench.config` imports the config schema from here.
"""
