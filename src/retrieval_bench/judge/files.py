"""The file names the judge writes (one place, so readers and writers agree)."""

# `run.judge POOL`: the pool's records with the judge's grades, next to the pool by default.
JUDGMENTS = "judgments.jsonl"
# `run.judge --calibrate`: the judge's grades of pairs people labelled (importable like the
# judgments), and its agreement with people.
CALIBRATION_JUDGMENTS = "calibration.jsonl"
CALIBRATION_JSON = "calibration.json"
CALIBRATION_MD = "calibration.md"
# Under the cache folder (`--cache-dir`, default outputs/cache): one file per judged pair.
CACHE_SUBDIR = "judge"
# The monthly job's judge step: per dataset folder of a month, the pool, judgments and snapshot.
MONTH_JUDGE_DIR = "judge"
