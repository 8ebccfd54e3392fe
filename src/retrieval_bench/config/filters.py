"""Which filters a job applies (`filters.*`): cities, permissions, exclusions
(`job.filters.PassageFilter` applies them)."""

from __future__ import annotations

from dataclasses import dataclass


# Not frozen: Hydra makes a frozen structured config read-only, and then an override such as
# filters.permissions=false could not be applied.
@dataclass
class FilterConfig:
    city: bool = True
    permissions: bool = True
    exclusions: bool = True
