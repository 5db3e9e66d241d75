"""Every use of a private or provisional API of the SDK, coredis or pydantic-settings."""
