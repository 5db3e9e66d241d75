"""The stdio wire: framing, pipes, the JSON span scanner, the codec and the large-message path."""
