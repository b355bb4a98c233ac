"""Error types shared by every face of caliper_jax (no JAX import here)."""


class CaliperError(ValueError):
    """Bad input: a file, field or argument that cannot be used. The message names it."""


class ModelError(CaliperError):
    """A robot description that cannot be turned into a Model."""


class NotFoundError(CaliperError):
    """A named thing (robot, file, frame) that does not exist; the message lists close names."""
