"""Files written safely, one module per job: atomic writes (`atomic`), strict JSON
(`strict_json`), advisory locks and the stale temp files they make safe to remove (`locks`),
output and cache folders checked before any work (`folders`), folders claimed for a job
(`claims`), content keys (`hashing`), values kept in the user's cache (`user_cache`).

A low layer: it imports only `errors`.
"""
