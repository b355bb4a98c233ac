"""Accuracy of an elevation map against ground truth on the same lattice (NumPy, host side).

The estimate and the truth are ``(m, n)`` arrays over the same cell centres ``xs (n,)``, ``ys (m,)``
(the ``(k + 0.5) * resolution`` lattice), so a cell is compared with a cell by integer indexing --
no interpolation. Scoring is restricted to the cells whose centre lies within ``radius`` of
``center_xy`` and whose truth is finite.

* :func:`score`: coverage (known cells / scored cells) and the error ``estimate - truth`` over the
  known scored cells: RMSE, MAE, bias (mean), p95 and max of ``|error|``; optionally step-height
  and slope recovery.
* :func:`step_recovery`: the plateaus of a stepped truth, each one's estimated height (median over
  its interior cells) and the recovered step heights between consecutive plateaus.
* :func:`slope_recovery`: a least-squares plane through the estimate and its inclination, against
  the truth's plane (or a given angle).
* :func:`triptych`: a PNG of truth, estimate and error side by side (matplotlib's Agg canvas,
  imported only there, no pyplot; the same inputs give the same bytes).
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from caliper_jax.errors import CaliperError


def _grid(estimate, valid, truth, xs, ys):
    est = np.asarray(estimate, dtype=np.float64)
    tru = np.asarray(truth, dtype=np.float64)
    ok = np.asarray(valid, dtype=bool)
    xs = np.asarray(xs, dtype=np.float64).reshape(-1)
    ys = np.asarray(ys, dtype=np.float64).reshape(-1)
    shape = (ys.size, xs.size)
    for name, a in (("estimate", est), ("valid", ok), ("truth", tru)):
        if a.shape != shape:
            raise CaliperError(f"metrics: {name} has shape {a.shape}; the lattice (len(ys), len(xs)) "
                               f"is {shape}")
    return est, ok & np.isfinite(est), tru, xs, ys


def scoring_mask(truth, xs, ys, center_xy, radius) -> np.ndarray:
    """(m, n) bool: cell centre within ``radius`` (m) of ``center_xy`` and a finite truth."""
    r = float(radius)
    if not (math.isfinite(r) and r > 0):
        raise CaliperError(f"metrics: radius must be a finite number > 0 (m), got {radius!r}")
    cx, cy = (float(c) for c in np.asarray(center_xy, dtype=np.float64).reshape(2))
    X, Y = np.meshgrid(np.asarray(xs, np.float64), np.asarray(ys, np.float64))
    return (np.hypot(X - cx, Y - cy) <= r) & np.isfinite(np.asarray(truth, np.float64))


def score(estimate, valid, truth, xs, ys, center_xy=(0.0, 0.0), radius: float = 2.5, *,
          steps: bool = False, slope: bool = False, slope_true_deg: float | None = None,
          observed=None, ambiguous=None) -> dict:
    """Accuracy within ``radius`` of ``center_xy``.

    estimate, valid, truth: (m, n) over cell centres xs (n,), ys (m,) (world, m). Returns a dict
    of floats: ``cells`` (scored cells), ``known`` (of them, known in the map), ``coverage``
    (known / cells), ``rmse``, ``mae``, ``bias`` (mean of estimate - truth), ``p95`` and ``max``
    of ``|estimate - truth|`` over the known scored cells (NaN when none is known); plus
    ``steps`` (:func:`step_recovery`) and ``slope`` (:func:`slope_recovery`) when asked for.

    Diagnostics: ``observed`` (m, n) bool, the cells any return fell in, adds ``observed_coverage``
    (what a map that kept every such cell would cover: the sensor's share of the coverage);
    ``ambiguous`` (m, n) bool, cells whose centre lies on a vertical face (no single true height),
    adds ``ambiguous_cells`` (known scored ones) and ``rmse_unambiguous`` (the RMSE without them).
    The headline figures always include every cell.
    """
    est, ok, tru, xs, ys = _grid(estimate, valid, truth, xs, ys)
    disc = scoring_mask(tru, xs, ys, center_xy, radius)
    known = disc & ok
    err = (est - tru)[known]
    cells = int(disc.sum())
    out = {"cells": cells, "known": int(known.sum()),
           "coverage": float(known.sum() / cells) if cells else float("nan")}
    if err.size:
        a = np.abs(err)
        out.update(rmse=float(np.sqrt(np.mean(err ** 2))), mae=float(np.mean(a)), bias=float(np.mean(err)),
                   p95=float(np.percentile(a, 95)), max=float(np.max(a)))
    else:
        out.update(rmse=float("nan"), mae=float("nan"), bias=float("nan"), p95=float("nan"), max=float("nan"))
    if observed is not None:
        seen = disc & np.asarray(observed, bool)
        out["observed_coverage"] = float(seen.sum() / cells) if cells else float("nan")
    if ambiguous is not None:
        amb = known & np.asarray(ambiguous, bool)
        rest = (est - tru)[known & ~amb]
        out["ambiguous_cells"] = int(amb.sum())
        out["rmse_unambiguous"] = float(np.sqrt(np.mean(rest ** 2))) if rest.size else float("nan")
    if steps:
        out["steps"] = step_recovery(est, ok, tru, disc)
    if slope:
        out["slope"] = slope_recovery(est, ok, tru, xs, ys, disc, true_deg=slope_true_deg)
    return out


def _interior(levels_idx, mask):
    """Cells whose 3x3 neighbourhood is inside ``mask`` and on the same level."""
    m, n = levels_idx.shape
    pad = np.pad(levels_idx, 1, constant_values=-1)
    pm = np.pad(mask, 1, constant_values=False)
    same = mask.copy()
    for dy in (-1, 0, 1):
        for dx in (-1, 0, 1):
            view = pad[1 + dy:1 + dy + m, 1 + dx:1 + dx + n]
            vm = pm[1 + dy:1 + dy + m, 1 + dx:1 + dx + n]
            same &= vm & (view == levels_idx)
    return same


def step_recovery(estimate, valid, truth, mask, *, quantum: float = 1e-3, min_cells: int = 20) -> dict:
    """Step heights of a terraced truth and how well the estimate recovers them.

    The truth's plateaus are its heights rounded to ``quantum`` (m) with at least ``min_cells``
    cells in ``mask``; each plateau's estimated height is the median of the estimate over its known
    interior cells (every 3x3 neighbour on the same plateau, so cells straddling an edge do not
    count). Returns ``levels`` (true plateau heights, ascending), ``estimated_levels`` (NaN where
    no interior cell is known), ``true_steps`` and ``estimated_steps`` (differences between
    consecutive plateaus), ``max_step_error`` (m; NaN without two known plateaus).
    """
    est = np.asarray(estimate, np.float64)
    ok = np.asarray(valid, bool) & np.isfinite(est)
    tru = np.asarray(truth, np.float64)
    mask = np.asarray(mask, bool) & np.isfinite(tru)
    q = np.where(mask, np.round(np.where(mask, tru, 0.0) / quantum), np.nan)
    values, counts = np.unique(q[mask], return_counts=True)
    levels = values[counts >= min_cells]
    idx = np.full(tru.shape, -1, dtype=np.int64)
    for i, v in enumerate(levels):
        idx[mask & (q == v)] = i
    inner = _interior(idx, idx >= 0)
    true_levels, est_levels = [], []
    for i in range(levels.size):
        sel = inner & (idx == i)
        true_levels.append(float(np.median(tru[sel])) if sel.any() else float(levels[i] * quantum))
        known = sel & ok
        est_levels.append(float(np.median(est[known])) if known.any() else float("nan"))
    true_steps = np.diff(true_levels).tolist()
    est_steps = np.diff(est_levels).tolist()
    errs = [abs(a - b) for a, b in zip(true_steps, est_steps, strict=True) if math.isfinite(b)]
    return {"levels": true_levels, "estimated_levels": est_levels, "true_steps": true_steps,
            "estimated_steps": est_steps, "max_step_error": max(errs) if errs else float("nan")}


def _plane(z, xs, ys, sel):
    X, Y = np.meshgrid(xs, ys)
    if int(sel.sum()) < 3:
        return float("nan"), float("nan")
    A = np.c_[X[sel], Y[sel], np.ones(int(sel.sum()))]
    (a, b, _), *_ = np.linalg.lstsq(A, z[sel], rcond=None)
    return math.degrees(math.atan(math.hypot(a, b))), math.degrees(math.atan2(-b, -a))


def slope_recovery(estimate, valid, truth, xs, ys, mask, *, true_deg: float | None = None) -> dict:
    """Inclination of a least-squares plane ``z = a x + b y + c`` through the known estimate cells
    in ``mask``, against the truth's plane (or ``true_deg`` when given). Returns ``true_deg``,
    ``estimated_deg``, ``error_deg`` (estimated - true) and the downhill azimuths (degrees from +x)
    ``true_azimuth_deg``/``estimated_azimuth_deg``."""
    est = np.asarray(estimate, np.float64)
    tru = np.asarray(truth, np.float64)
    xs = np.asarray(xs, np.float64)
    ys = np.asarray(ys, np.float64)
    mask = np.asarray(mask, bool)
    e_deg, e_az = _plane(est, xs, ys, mask & np.asarray(valid, bool) & np.isfinite(est))
    t_deg, t_az = _plane(tru, xs, ys, mask & np.isfinite(tru))
    if true_deg is not None:
        t_deg = float(true_deg)
    return {"true_deg": t_deg, "estimated_deg": e_deg, "error_deg": e_deg - t_deg,
            "true_azimuth_deg": t_az, "estimated_azimuth_deg": e_az}


def triptych(truth, estimate, path, title: str = "", *, valid=None, xs=None, ys=None,
             center_xy=None, radius: float | None = None) -> Path:
    """Write a PNG of truth | estimate | error (estimate - truth) and return its path.

    truth, estimate (m, n); ``valid`` masks unknown cells (drawn blank); ``xs``/``ys`` label the
    axes in metres; ``center_xy`` and ``radius`` draw the scoring circle. Heights share one colour
    scale; the error scale is symmetric. Deterministic: no timestamp in the file.
    """
    try:
        import matplotlib
        from matplotlib.figure import Figure  # no pyplot: no GUI backend, no global figure state
    except ImportError:
        raise CaliperError('triptychs need matplotlib (pip install "caliper-jax[plot]")') from None

    tru = np.asarray(truth, np.float64)
    est = np.asarray(estimate, np.float64)
    if tru.shape != est.shape or tru.ndim != 2:
        raise CaliperError(f"triptych: truth {tru.shape} and estimate {est.shape} must be the same (m, n)")
    if valid is not None:
        est = np.where(np.asarray(valid, bool), est, np.nan)
    err = est - tru
    finite = tru[np.isfinite(tru)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    if hi - lo < 1e-6:
        lo, hi = lo - 0.01, hi + 0.01
    ae = np.abs(err[np.isfinite(err)])
    elim = max(0.005, float(np.percentile(ae, 99))) if ae.size else 0.01
    if xs is not None and ys is not None:
        xs, ys = np.asarray(xs, np.float64), np.asarray(ys, np.float64)
        res_x = xs[1] - xs[0] if xs.size > 1 else 1.0
        res_y = ys[1] - ys[0] if ys.size > 1 else 1.0
        extent = (xs[0] - res_x / 2, xs[-1] + res_x / 2, ys[0] - res_y / 2, ys[-1] + res_y / 2)
    else:
        extent = None
    fig = Figure(figsize=(13.5, 4.4), dpi=80)
    axes = fig.subplots(1, 3)
    panels = ((tru, "truth (m)", "viridis", lo, hi), (est, "estimate (m)", "viridis", lo, hi),
              (err, "error (m)", "RdBu_r", -elim, elim))
    for ax, (img, label, cmap, vmin, vmax) in zip(axes, panels, strict=True):
        cm = matplotlib.colormaps[cmap].with_extremes(bad="#dddddd")
        im = ax.imshow(np.ma.masked_invalid(img), origin="lower", cmap=cm, vmin=vmin, vmax=vmax,
                       extent=extent, interpolation="nearest")
        ax.set_title(label)
        if extent is not None:
            ax.set_xlabel("x (m)")
            ax.set_ylabel("y (m)")
            if center_xy is not None and radius is not None:
                t = np.linspace(0.0, 2 * np.pi, 181)
                ax.plot(center_xy[0] + radius * np.cos(t), center_xy[1] + radius * np.sin(t), "k--", lw=0.8)
        fig.colorbar(im, ax=ax, shrink=0.85)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", metadata={"Software": None})
    return path
