"""Compare retrievers on labelled evaluation sets, per query type, stage by stage."""

__version__ = "0.1.0"
