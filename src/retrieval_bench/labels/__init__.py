"""Labels after a job has run: judgment pools from finished jobs, and re-scoring stored rankings
against the current label snapshot."""
