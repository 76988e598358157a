"""Shared test settings."""

from hypothesis import settings

# No per-example deadline: CI shares two cores, and a slow example is not a wrong one.
settings.register_profile("rag-judge", deadline=None)
settings.load_profile("rag-judge")
