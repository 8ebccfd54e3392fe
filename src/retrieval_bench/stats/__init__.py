"""Statistics over per-query values, with no notion of a job, a file or a report: paired
sign-flip tests (`paired`) and their multiple-testing corrections (`corrections`) under one set
of settings (`settings`), power and minimum detectable effects (`power`), verdicts among
configurations (`verdicts`), the rank bootstrap (`bootstrap`) and tiers (`tiers`), the Pareto
front of quality against a cost (`pareto`), agreement between raters (`agreement`) and
prediction-powered means (`ppi`).

A low layer (just above `config`): `scoring`, `compare`, `judge`, `tune` and `benchmark` use it;
it imports none of them. Kept import-light: scipy is imported inside the functions that need it.
"""
