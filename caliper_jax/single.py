"""Single-configuration calls: a low-overhead path for batch 1 (one ``q`` per call, e.g. a control
loop or a Python script that asks one question at a time).

``single_call(model, op)`` compiles one executable ahead of time, with the Model closed over as
constants (no pytree flattening of the Model per call: ``jax.jit(f)(model, q)`` flattens its 18
leaves on every call), and returns a small callable that hands its arrays straight to the
compiled executable (``jax.stages.Compiled``, JAX's C++ dispatch path)::

    fk = single_call(model, "fk")                 # (nframe, 4, 4) T_world_frame, NumPy
    tau = single_call(model, "rnea")(q, v, a)     # (nv,)

Ops (results are those of the normal path, the same functions are compiled):

=====================  ====================  =========================================================
op                     arguments             result
=====================  ====================  =========================================================
``"fk"``               q (nq,)               ``kinematics.forward_kinematics``: (nframe, 4, 4), or
                                             ``kinematics.frame_pose`` (4, 4) when ``frame`` is given
``"jacobian"``         q (nq,)               ``kinematics.frame_jacobian`` (6, nv) of ``frame``,
                                             rows [v; w], ``reference`` "world" or "local"
``"rnea"``             q, v, a               ``dynamics.rnea``: tau (nv,)
``"aba"``              q, v, tau             ``dynamics.aba``: qdd (nv,)
``"forward_dynamics"`` q, v, tau             ``dynamics.forward_dynamics``: qdd (nv,) (CRBA +
                                             Cholesky for one instance)
=====================  ====================  =========================================================

Costs (panda; ``benchmarks/bench_core.py --part latency`` measures them, docs/architecture.md
lists the figures): the executable is called with NumPy arrays directly -- the C++ dispatch path
moves them to the device itself, where ``jax.device_put`` from Python costs several calls' worth
(~70 us). Arrays already on the device (``jax.Array`` of the right dtype) pass through unconverted.
The result is copied to NumPy (``np.asarray``: ~1 us once the result is ready); ``device=True``
returns the ``jax.Array`` instead (asynchronous: the call returns before the result is computed,
useful when it feeds another JAX call). What remains is XLA's CPU runtime: dispatching any
executable (a ``q + 1`` round trip costs ~10-15 us) plus ~45-300 small kernels run one after
another (FK 45, RNEA 63, ABA 307 on the panda), which is why the call stays an order of magnitude
above Pinocchio's. ``jax_cpu_enable_async_dispatch`` False (set before JAX's first use, e.g.
``JAX_CPU_ENABLE_ASYNC_DISPATCH=0``) runs the executable on the calling thread; it measured no
clear change.

Inputs are checked for shape only (no finiteness check: it would cost a noticeable share of the
call); values are cast to the executable's dtype.
"""
from __future__ import annotations

import time
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from caliper_jax import dynamics, kinematics
from caliper_jax.errors import CaliperError
from caliper_jax.model import Model

#: op -> (argument names, function of (model, *args, frame, reference))
OPS = {
    "fk": (("q",), lambda m, q, frame, ref: (kinematics.forward_kinematics(m, q) if frame is None
                                             else kinematics.frame_pose(m, q, frame))),
    "jacobian": (("q",), lambda m, q, frame, ref: kinematics.frame_jacobian(m, q, frame, ref)),
    "rnea": (("q", "v", "a"), lambda m, q, v, a, frame, ref: dynamics.rnea(m, q, v, a)),
    "aba": (("q", "v", "tau"), lambda m, q, v, tau, frame, ref: dynamics.aba(m, q, v, tau)),
    "forward_dynamics": (("q", "v", "tau"),
                         lambda m, q, v, tau, frame, ref: dynamics.forward_dynamics(m, q, v, tau)),
}


class SingleCall:
    """One compiled executable for one configuration at a time; call it with the op's arrays.

    Attributes: ``op``, ``dtype`` (NumPy dtype of inputs and outputs), ``shapes`` (the argument
    shapes), ``compile_s`` (seconds to trace and compile at construction), ``compiled`` (the
    ``jax.stages.Compiled``, for callers that manage device arrays themselves)."""

    __slots__ = ("op", "dtype", "shapes", "names", "compile_s", "compiled", "device", "_robot")

    def __init__(self, op, names, shapes, dtype, compiled, compile_s, device, robot):
        self.op, self.names, self.shapes, self.dtype = op, names, shapes, dtype
        self.compiled, self.compile_s, self.device, self._robot = compiled, compile_s, device, robot

    def _arg(self, x, i):
        # fast path: an array of the right shape and dtype (NumPy or jax.Array) goes through as is
        if getattr(x, "dtype", None) != self.dtype or getattr(x, "shape", None) != self.shapes[i]:
            try:
                x = np.asarray(x, dtype=self.dtype)
            except (TypeError, ValueError):
                raise CaliperError(f"{self.names[i]}: not an array of numbers") from None
            if x.shape != self.shapes[i]:
                raise CaliperError(f"{self.names[i]}: expected shape {self.shapes[i]} for "
                                   f"{self._robot!r}, got {x.shape}")
        return x

    def __call__(self, *args):
        if len(args) != len(self.shapes):
            raise CaliperError(f"{self.op} takes {len(self.shapes)} arrays "
                               f"({', '.join(self.names)}), got {len(args)}")
        out = self.compiled(*[self._arg(x, i) for i, x in enumerate(args)])
        return out if self.device else np.asarray(out)

    def __repr__(self):
        return (f"SingleCall({self.op!r}, {self._robot!r}, {self.dtype.name}, "
                f"args={dict(zip(self.names, self.shapes, strict=True))})")


def single_call(model: Model, op: str, *, frame=None, reference: str = "world", dtype=None,
                device: bool = False) -> SingleCall:
    """A compiled one-configuration ``op`` of ``model`` (see the module docstring for the ops).

    ``frame``: a frame name or index (required for "jacobian"; for "fk" one frame's (4, 4) pose
    instead of every frame's). ``dtype``: float32 or float64 (default: the model's; float64 needs
    ``jax_enable_x64``). ``device=True`` returns ``jax.Array`` results instead of NumPy arrays.
    Compiles once, here."""
    if op not in OPS:
        raise CaliperError(f"op must be one of {', '.join(OPS)}, got {op!r}")
    names, fn = OPS[op]
    if op == "jacobian" and frame is None:
        raise CaliperError("frame: the jacobian op needs a frame name or index")
    if op in ("fk", "jacobian"):
        if frame is not None:
            frame = _frame_index(model, frame)
        if reference not in kinematics.REFERENCES:
            raise CaliperError(f"reference must be one of {kinematics.REFERENCES}, got {reference!r}")
    elif frame is not None:
        raise CaliperError(f"frame: the {op} op takes no frame")
    if dtype is not None and jnp.dtype(dtype).itemsize == 8 and not jax.config.jax_enable_x64:
        raise CaliperError(f"dtype {jnp.dtype(dtype).name} needs jax_enable_x64 "
                           "(jax.config.update('jax_enable_x64', True))")
    m = model if dtype is None else model.astype(dtype)
    np_dtype = np.dtype(m.dtype)
    sizes = {"q": m.nq, "v": m.nv, "a": m.nv, "tau": m.nv}
    shapes = tuple((sizes[n],) for n in names)
    t0 = time.perf_counter()
    compiled = jax.jit(partial(fn, m, frame=frame, ref=reference)).lower(
        *[jax.ShapeDtypeStruct(s, np_dtype) for s in shapes]).compile()
    return SingleCall(op, names, shapes, np_dtype, compiled, time.perf_counter() - t0, device, m.name)


def _frame_index(model: Model, frame) -> int:
    if isinstance(frame, str):
        return model.frame_id(frame)
    if isinstance(frame, (int, np.integer)) and not isinstance(frame, bool) and 0 <= frame < model.nframe:
        return int(frame)
    raise CaliperError(f"frame: expected a frame name or an index in [0, {model.nframe}), got {frame!r}")
