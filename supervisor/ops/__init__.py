"""Operations: status, metrics, the admin endpoint, rate-limited logs, progress, heap tuning."""
