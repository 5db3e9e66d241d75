"""The host side: the Front (stdio, HTTP), routing of host requests, the relay, exchanges, splice."""
