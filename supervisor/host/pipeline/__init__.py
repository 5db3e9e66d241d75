"""The one pipeline every host's ``tools/call`` takes, whichever front read it (issue 47).

``paths`` decides the way (the splice, a front's own task, the SDK's server),
``stages`` holds each per-call concern in one function, ``call`` is what a call
is (``ToolCall``), ``driver`` runs the stages over a call a task carries (the one
driver), ``adapters`` build a call and write its reply (the SDK's handler, a
front's own task; the sandbox's is ``host.code_mode``), ``spliced`` starts a call
on the wire splice, ``rounds`` and ``exchanges`` do what the eras need between them.
"""
