"""Which filters a job applies (`filters.*`): cities, permissions, exclusions
(`job.filters.PassageFilter` applies them)."""

from __future__ import annotations

from dataclasses import dataclass


# Not frozen: Hydra makes a frozen structured config read-only, and then an override such as
# filters.permissions=false could not be applied.
@dataclass
class FilterConfig:
    city: bool = True
    """Keep only passages of the cities a query names (parsed against the lexicon), and those
    with no city, for every arm."""
    permissions: bool = True
    """Keep only passages whose `meta.acl` lets the query's `user_role` read them."""
    exclusions: bool = True
    """Drop passages about the entities a query excludes ("除了..."), when its route's strategy
    sets `exclude`."""
