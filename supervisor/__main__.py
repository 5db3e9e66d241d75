"""``python -m supervisor``: the same as the ``mcp-supervisor`` console script."""

from __future__ import annotations

import sys

from supervisor.cli import main

sys.exit(main())
