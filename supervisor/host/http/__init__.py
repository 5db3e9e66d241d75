"""The HTTP front: streamable HTTP on our own server (``link``), and its adapter to the pipeline.

``posts`` answers a 2026-era host's plain ``tools/call`` POST itself, and
hands a handshake-era session's to ``sessions``; either sends its call the way
``host.pipeline.paths`` names: as bytes on the splice's HTTP half (``splice``)
or run in the POST's own task. ``answers`` reads a POST's headers and writes
its response. Anything else reaches the SDK's app.
"""
