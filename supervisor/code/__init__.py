"""Code mode (issue 58): the typed API a program sees of a view's tools, and the sandbox that runs it.

``names`` turns server, tool and argument names into Python identifiers (one
rule); ``stubs`` turns each tool's schemas into a typed async function's stub
and a one-line signature; ``values`` makes what a program returns into
bounded JSON; ``engine`` runs a program in pydantic-monty's sandbox (the
``code`` extra), answering every tool call it makes through a callback.
Nothing here knows the host side: ``host.code_mode`` runs each of those calls
through the call pipeline.
"""
