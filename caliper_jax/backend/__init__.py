"""The backend contract every simulator or robot implements (see :mod:`.contract`)."""
from caliper_jax.backend.contract import Backend, BackendState, ControlMode, check_step_dt

__all__ = ["Backend", "BackendState", "ControlMode", "check_step_dt"]
