"""Running episodes and experiments."""
