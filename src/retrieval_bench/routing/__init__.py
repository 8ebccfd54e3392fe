"""Routing: the query parser (entities, cities, negation), the rules that pick a route, the router
that applies them, and what the router is measured by (routing metrics, the routing ceiling)."""
