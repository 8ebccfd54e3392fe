"""The file names active labelling writes (one place, so readers and writers agree)."""

# A plan's folder (`run.label plan --out DIR`): the design, and one pool file per round.
PLAN_JSON = "plan.json"
# round-<t>/pool.jsonl and pool.csv: the chosen queries' pairs for people to grade.
ROUND_DIR = "round-{round}"
# `run.label estimate`: the estimates under the plan.
ESTIMATE_JSON = "estimate.json"
ESTIMATE_MD = "estimate.md"
# `run.label simulate --out DIR`: the measured table.
SIMULATION_JSON = "simulation.json"
SIMULATION_MD = "simulation.md"
