"""The files a tuning folder holds (`tune.dir`)."""

from __future__ import annotations

# The estimate: folds, chosen configurations, tuned and held-out scores, their gap, per type,
# and the held-out comparison with the baseline.
TUNE_JSON = "tune.json"
# The same, for people.
TUNE_MD = "tune.md"
# The configuration chosen on all queries, runnable: python -m run --config-dir DIR
# --config-name tuned.
TUNED_YAML = "tuned.yaml"
TUNED_CONFIG_NAME = "tuned"
# Optuna's storage (one study per fold and one on all queries): a rerun resumes from it, and
# optuna-dashboard opens it.
STUDY_DB = "study.sqlite3"
# Held while a tuning run works in the folder: a second run there waits for it, then resumes.
LOCK = ".tune.lock"
