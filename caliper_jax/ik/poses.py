"""The one pose layout of every pose input and output: a 4x4 homogeneous ``T_world_frame``,
row-major -- ``T[:3, :3]`` the rotation, ``T[:3, 3]`` the translation, ``T[3] == (0, 0, 0, 1)``.
It is exactly what ``caliper fk --json`` prints and ``api.fk`` returns, so FK output is IK input
with no transpose anywhere. As flat text, 16 numbers row by row.

Host-side validation (NumPy, no JAX): a transposed (column-major) matrix carries its translation
in the bottom row, which is rejected with a message that says so, instead of being solved as a
different target. The one transposed matrix that cannot be told apart is a pure rotation with
zero translation (its transpose is a valid pose too).
"""
from __future__ import annotations

import numpy as np

from caliper_jax.errors import CaliperError

LAYOUT = "T_world_frame, 4x4 row-major (R = T[:3, :3], p = T[:3, 3], bottom row 0 0 0 1)"
ORTHO_TOL = 1e-6
ROW_TOL = 1e-9


def as_poses(T, what: str = "target") -> np.ndarray:
    """Validate poses (..., 4, 4) (or (..., 16) flat, row-major) -> float64 array (..., 4, 4)."""
    arr = np.asarray(T, dtype=np.float64)
    if arr.ndim >= 1 and arr.shape[-1] == 16 and not (arr.ndim >= 2 and arr.shape[-2:] == (4, 4)):
        arr = arr.reshape(arr.shape[:-1] + (4, 4))
    if arr.ndim < 2 or arr.shape[-2:] != (4, 4):
        raise CaliperError(f"{what}: expected 4x4 poses ({LAYOUT}) or 16 numbers each, "
                           f"got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise CaliperError(f"{what}: non-finite values")
    bottom = arr[..., 3, :]
    bad = np.abs(bottom - np.array([0.0, 0.0, 0.0, 1.0])).max(axis=-1) > ROW_TOL
    if np.any(bad):
        k = int(np.argmax(bad.reshape(-1)))
        row = bottom.reshape(-1, 4)[k]
        last_col = arr.reshape(-1, 4, 4)[k][:, 3]
        hint = ""
        if np.allclose(last_col, [0.0, 0.0, 0.0, 1.0], atol=ROW_TOL):
            hint = " -- this looks transposed (column-major); pass T_world_frame row-major as " \
                   "`caliper fk --json` prints it"
        raise CaliperError(f"{what}: bottom row must be 0 0 0 1 ({LAYOUT}), got "
                           f"{np.array2string(row, precision=6)}{hint}")
    R = arr[..., :3, :3]
    err = np.abs(np.swapaxes(R, -1, -2) @ R - np.eye(3)).max(axis=(-2, -1))
    det = np.linalg.det(R)
    if np.any(err > ORTHO_TOL) or np.any(det <= 0):
        raise CaliperError(f"{what}: the rotation block is not a rotation (|R^T R - I| up to "
                           f"{float(np.max(err)):.3g}, det down to {float(np.min(det)):.3g})")
    return arr


def parse_pose_text(text: str, what: str = "--target") -> np.ndarray:
    """'16 numbers, row-major' (commas, spaces, brackets all accepted: a pasted ``caliper fk
    --json`` matrix works) -> validated (4, 4)."""
    cleaned = text
    for ch in "[](),;":
        cleaned = cleaned.replace(ch, " ")
    parts = cleaned.split()
    try:
        values = np.array([float(p) for p in parts])
    except ValueError:
        raise CaliperError(f"{what}: not a list of numbers: {text!r}") from None
    if values.size != 16:
        raise CaliperError(f"{what}: expected 16 numbers ({LAYOUT}), got {values.size}")
    return as_poses(values.reshape(4, 4), what)


def pose_from_position(p, what: str = "--position") -> np.ndarray:
    """A pose with identity rotation at position p (3,) (for position-only targets)."""
    arr = np.asarray(p, dtype=np.float64)
    if arr.shape[-1:] != (3,) or not np.all(np.isfinite(arr)):
        raise CaliperError(f"{what}: expected finite x, y, z, got shape {arr.shape}")
    T = np.broadcast_to(np.eye(4), arr.shape[:-1] + (4, 4)).copy()
    T[..., :3, 3] = arr
    return T


__all__ = ["LAYOUT", "as_poses", "parse_pose_text", "pose_from_position"]
