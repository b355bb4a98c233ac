"""mjx_backend."""
