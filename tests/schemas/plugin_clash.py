"""A plugin module whose job type has a built-in type's name (tests/schemas/test_plugins.py)."""

from tests.schemas.plugin_samples import CLASH as JOB_TYPE

__all__ = ["JOB_TYPE"]
