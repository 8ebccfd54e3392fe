"""The job folder: every file name of a job, sweep and month folder, and the typed readers and
writers of those files. Nothing outside this package spells a file name of a job folder.

* `names`: every file name (job, sweep, month folder, benchmark root, pool output).
* `files`: one typed reader per file read back (rankings.jsonl as `QueryRecord`s, metrics.json,
  manifest.json, answers.json, qrels, the job config, plots, a month's state and gate record).
* `marker`: the `UNFINISHED` marker (written, read, judged against the living process).
* `read`: job folders found, judged finished or not, loaded as `FinishedJob`s.
* `job_sets`: a set of finished jobs split by dataset and told apart by a label.
* `write`: the job folder written (`write_job`), and the long table of a job or a sweep.

Layers: above `job/` and `reports/` (whose writers it gives the paths), below `answers/`,
`labels/`, `compare/` and `benchmark/` (which read through it)."""
