"""A plugin module that fails to import, as one whose settings are missing does (tests/schemas/test_plugins.py)."""

raise RuntimeError("WORDS_API_TOKEN is not set")
