"""The upstream side: one generation's session, its transports, spawn, listen, listing, reconnect delays."""
