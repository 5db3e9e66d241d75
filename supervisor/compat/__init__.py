"""Every use of a private or provisional API, one module per library: the mcp SDK, coredis, anyio, pydantic-settings.

The SDK has three (``sdk``, ``listing``, ``oauth``), so that importing one pulls in no other. Each assumption has
its test (``tests/compat/``, or beside its one user), so an upgrade breaks here, loudly.
"""
