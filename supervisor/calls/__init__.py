"""What the host side and the upstream side share about one call in flight."""
