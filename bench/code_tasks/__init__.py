"""The task set of ``bench.code_mode`` (issue 58, item 7): multi-step tasks over real third-party servers.

``TASKS`` in a fixed order (a later task of one mode may see an earlier one's
writes: each writes where no other task reads); ``SEARCHES``, what a model asks
the search view's ``search_tools`` for, per tool a task needs. ``task`` defines a
task, ``fixture`` the world they run in; one module per server family holds the
tasks themselves.
"""

from __future__ import annotations

from typing import Final

from bench.code_tasks import files, git, memory, services
from bench.code_tasks.task import Task

TASKS: Final[tuple[Task, ...]] = (*files.TASKS, *git.TASKS, *memory.TASKS, *services.TASKS)
SEARCHES: Final[dict[str, str]] = {**files.SEARCHES, **git.SEARCHES, **memory.SEARCHES, **services.SEARCHES}
SERVERS: Final = ("files", "git", "memory", "everything", "time", "fetch")
