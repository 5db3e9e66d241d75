"""The commands that connect once and stop: ``tools`` and ``call`` (``oneshot``), ``login``/``logout``
(``login``) and ``pins list|diff|approve|reset`` (``pins``). ``cli`` imports each only when its command runs."""
