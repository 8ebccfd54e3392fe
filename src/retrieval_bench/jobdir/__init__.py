"""The job folder: every file name of a job, sweep and month folder, and the typed readers and
writers of those files. Nothing outside this package spells a file name of a job folder."""
