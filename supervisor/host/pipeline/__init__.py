"""The one pipeline every host's ``tools/call`` takes, whichever front read it (issue 47).

``paths`` decides the way (the splice, a front's own task, the SDK's server),
``stages`` holds each per-call concern in one function, ``runner`` runs a call
a task carries, ``spliced`` starts a call on the wire splice, ``rounds`` and
``exchanges`` do what the eras need between them.
"""
