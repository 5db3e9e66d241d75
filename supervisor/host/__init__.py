"""The host side: the Front (``front``), its two front adapters (``stdio``, ``http``), the one call pipeline
(``pipeline``), routing of host requests, the relay and subscriptions."""
