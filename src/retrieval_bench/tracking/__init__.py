"""Finished folders logged to an experiment tracker (MLflow), and read back from it.

* `names`: the run tags, metric names and artifact paths every logged run uses.
* `folders`: which kind of folder a path is (job, sweep, month, tuning) and its stable key.
* `content`: what a folder logs (params, metrics, tags, artifacts), read from its files alone.
* `store`: the one module that imports MLflow (its `MlflowClient`): find-or-create a run by its
  key, log a folder's content onto it, list and download.
* `sync`: log folders (`python -m run.track sync`), idempotently; what a live job, sweep or
  month does after its folder is complete.
* `listing`: what the tracker holds (`run.track ls`).
* `tune_log`: a tuning folder's study and trials.

The app's side (`run.tracking`): the logger process a job or sweep hands its finished folders
to (`python -m run.track serve`, so that MLflow is imported and talked to off the job's own
process, and a tracker that is down never fails a job), and the Hydra callback that gives a
sweep its parent run.
* `restore`: earlier benchmark months read back from the tracker (`baseline_from=tracking`).

Importing this package imports no MLflow: only `store` does, and only when called.
"""
