"""doctors."""
