"""OAuth for HTTP upstreams and the token store."""
