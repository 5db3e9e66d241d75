"""The package version, importable without importing the package's modules."""

from __future__ import annotations

__version__ = "0.1.0"
