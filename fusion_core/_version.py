"""The package version, defined once (pyproject.toml reads it from here)."""

__version__ = "0.2.0.dev0"
