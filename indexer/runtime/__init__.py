"""What every layer reads: the configuration and structured logging."""
