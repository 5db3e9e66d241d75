"""Configuration: the models of settings.toml, the loader, check, env overrides, interpolation, import."""
