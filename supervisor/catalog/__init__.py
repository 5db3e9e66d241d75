"""The catalog: the Registry, public names, the response cache, the sync mailbox, the wire form."""
