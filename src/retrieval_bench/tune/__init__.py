"""Tuning a job's settings with Optuna, with an honest estimate around the search: the scored
queries are split into K folds stratified by query type; each fold's search runs on the other
folds and its choice is scored on the held-out fold only, so `tune.json` says how much of the
tuned figure (chosen and scored on the same queries) survives on queries the search never saw.

Modules: `space` (the search space, Hydra's sweep grammar -> Optuna distributions), `configs`
(a trial's values -> its RunConfig), `replay` (a trial's job: the arms built once per arm setting
and their pools reused, everything after them run by the job's own code), `study` (Optuna's
studies in SQLite, resumable), `estimate` (folds, held-out scores, the gap, the baseline test),
`tuned` (tuned.yaml), `run` (the whole tuning), `names` (the files it writes)."""
