"""The stdio front: a host on our stdin and stdout (``link``), and its adapter to the pipeline.

``reader`` takes each ``tools/call`` line off the host wire before the SDK
parses it and sends it the way ``host.pipeline.paths`` names: as bytes on the
splice, or to a task of its own (``tasks``); ``wire`` writes answers and
notices in order, ``lists`` answers a first-page ``tools/list`` from the cache.
"""
