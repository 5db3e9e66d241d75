"""Pinned tool and prompt definitions (issue 27): fingerprints, hidden characters, the judge, diffs, the pin store.

The pure core (``fingerprint``, ``hidden``, ``judge``, ``diff``) does no I/O
and never awaits; ``store`` is the one module that touches files.
"""
