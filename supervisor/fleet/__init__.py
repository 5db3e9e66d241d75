"""The fleet catalog store on Redis: client, scripts, subscriber, the cache actor's fleet side."""
