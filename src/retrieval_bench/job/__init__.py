"""Running one job: build its plug-ins from config, run every query through the pipeline of
stages (each boundary a checked contract), score the records, and return the `JobResult`."""
