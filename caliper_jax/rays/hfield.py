"""Height fields: host-side tables and an exact, watertight ray cast in JAX (MuJoCo semantics).

A MuJoCo height field ``hfield_size = (sx, sy, top, base)`` with ``nrow x ncol`` samples ``h`` (the
model's ``hfield_data``, normalised to [0, 1], row ``r`` at ``y = -sy + r * dy``, column ``c`` at
``x = -sx + c * dx``, ``dx = 2 sx / (ncol - 1)``, ``dy = 2 sy / (nrow - 1)``) is, in its geom frame:

* the surface ``z = top * h`` over ``[-sx, sx] x [-sy, sy]``, each grid cell split into two
  triangles along the diagonal from its (low x, low y) corner to its (high x, high y) corner (the
  split of ``mj_rayHfield``: triangle A = (c, r), (c+1, r), (c+1, r+1); triangle B = (c, r),
  (c+1, r+1), (c, r+1)); both sides of a triangle are hit and the normal always points up (+z);
* the four side walls of the box ``0 <= z <= top``, up to the surface's edge profile;
* the base box ``-base <= z <= 0`` (entered from any side; a ray starting inside gets its exit).

``mj_rayHfield`` tests every triangle in the rectangle of cells spanned by the ray's segment in the
top box, so a near-horizontal ray costs O(cells^2) there (seconds per LiDAR scan on a tall,
sloped field). Here the surface is found by a stackless walk over a pyramid of bounding slabs
(:func:`tables`; level ``l`` cell = ``2^l x 2^l`` grid cells, up to one cell for the whole field):
each cell stores a plane ``c + a u + b v`` and a half-thickness ``e`` such that every sample of the
cell, hence the triangulated surface over it, lies within ``e`` of the plane (the least-squares
plane or the flat one, whichever is thinner). The ray's height above the plane is linear along the
ray, so per cell: if the ray stays outside the slab over the cell it is skipped whole (and the walk
climbs a level when the next cell has a new parent); otherwise the walk jumps to where the ray
enters the slab and descends to the level whose cells the ray's stretch inside the slab fits in. A
plane is exact for a planar field, and close for a smooth one, so a ray grazing a slope skips
straight to its hit instead of crossing every cell near the surface.

At level 0 the exact test follows the ray through the cell's two triangles: ``g(t) = z_ray(t) -
surface(t)`` is linear on each piece (split where the ray crosses the diagonal), evaluated once per
piece end, and the first sign change is the hit. The value at a piece end is shared with the next
piece and the next cell, so a ray through a shared edge or the diagonal cannot slip between
triangles (watertight by construction; MuJoCo 3.17 lets a ray lying exactly in an edge's vertical
plane fall through, e.g. a beam at azimuth 0 from a grid line, or a vertical ray on the field's
outer edge). A ray that only touches the surface, at a crease (edge, diagonal or vertex: where the
piece ends are), is a hit as in MuJoCo's inclusive triangle test: ``|g|`` within rounding there
counts. The slab tests carry a rounding margin, so a skip is never wrong; only the exact test
decides a hit.

The walk is a ``lax.while_loop`` over :data:`CHUNK` rays at a time; each iteration moves to the next
cell at the current level or descends, so a walk ends within ``max_iterations`` (a cap that is
never what stops it). It is not differentiable; the hit distance is recomputed on the found
triangle's plane (differentiable in the ray and the geom pose), as for meshes.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from caliper_jax.errors import CaliperError
from caliper_jax.rays.primitives import BOX, MINVAL, local_normal, ray_box


def _fit_level(h, s):
    """Bounding slabs of the level whose cells are ``s x s`` grid cells: for each cell (row major)
    ``(c, a, b, e)``: the cell's samples lie within ``e`` of the plane ``c + a u + b v`` (``u``, ``v``
    grid units from the cell's centre), the least-squares plane or the flat one, whichever is
    tighter. Cells cut by the field's edge use the samples they have. Returns (cells, 4) and the
    cells per row."""
    ny, nx = h.shape[0] - 1, h.shape[1] - 1
    my, mx = -(-ny // s), -(-nx // s)
    hp = np.pad(h, ((0, my * s - ny), (0, mx * s - nx)), mode="constant", constant_values=np.nan)
    win = np.lib.stride_tricks.sliding_window_view(hp, (s + 1, s + 1))[::s, ::s]    # (my, mx, s+1, s+1)
    ok = ~np.isnan(win)
    z = np.where(ok, win, 0.0)
    d = np.arange(s + 1) - 0.5 * s
    u = np.broadcast_to(d[None, :], (s + 1, s + 1))
    v = np.broadcast_to(d[:, None], (s + 1, s + 1))
    w = ok.astype(np.float64)
    # least squares z = c + a u + b v over the cell's samples: 3 x 3 normal equations per cell
    cols = (np.ones_like(u), u, v)
    A = np.stack([np.stack([np.einsum("ijkl,kl->ij", w, p * q) for q in cols], -1) for p in cols], -2)
    rhs = np.stack([np.einsum("ijkl,kl->ij", z, p) for p in cols], -1)
    A = A + 1e-12 * np.eye(3)
    coef = np.linalg.solve(A, rhs[..., None])[..., 0]
    c, a, b = coef[..., 0], coef[..., 1], coef[..., 2]
    res = np.where(ok, z - c[..., None, None] - a[..., None, None] * u - b[..., None, None] * v, 0.0)
    e = np.abs(res).max(axis=(2, 3))
    lo = np.where(ok, win, np.inf).min(axis=(2, 3))
    hi = np.where(ok, win, -np.inf).max(axis=(2, 3))
    flat = 0.5 * (hi - lo) <= e
    c = np.where(flat, 0.5 * (hi + lo), c)
    a = np.where(flat, 0.0, a)
    b = np.where(flat, 0.0, b)
    e = np.where(flat, 0.5 * (hi - lo), e)
    return np.stack([c, a, b, e], axis=-1).reshape(-1, 4), mx


def tables(data) -> dict:
    """Host tables of one height field from its samples ``data`` (nrow, ncol) (normalised heights,
    row = y index). Returns ``cells`` (ny * nx, 4) the corner samples of each grid cell
    ``(h[r, c], h[r, c+1], h[r+1, c], h[r+1, c+1])``, ``planes`` (sum of level sizes, 4) the slab
    pyramid (:func:`_fit_level`, level 0 = grid cells, each level's cells ``2 x 2`` of the one below,
    up to one cell), level by level, row major, ``slope`` the largest ``|a| + |b|`` of any slab, and
    the static ``level_offset``/``level_nx`` tuples (where each level starts, cells per row)."""
    h = np.asarray(data, dtype=np.float64)
    if h.ndim != 2 or h.shape[0] < 2 or h.shape[1] < 2:
        raise CaliperError(f"height field: need at least 2 x 2 samples, got shape {h.shape}")
    ny, nx = h.shape[0] - 1, h.shape[1] - 1
    corners = np.stack([h[:-1, :-1], h[:-1, 1:], h[1:, :-1], h[1:, 1:]], axis=-1)    # (ny, nx, 4)
    offset, nxl, rows = [], [], []
    n, s = 0, 1
    while True:
        p, m = _fit_level(h, s)
        offset.append(n)
        nxl.append(m)
        rows.append(p)
        n += len(p)
        if s >= nx and s >= ny:
            break
        s *= 2
    planes = np.concatenate(rows, axis=0)
    return {"cells": corners.reshape(-1, 4), "planes": planes,
            "slope": float(np.max(np.abs(planes[:, 1]) + np.abs(planes[:, 2]))),
            "level_offset": tuple(offset), "level_nx": tuple(nxl)}


def max_iterations(nrow: int, ncol: int, nlevel: int) -> int:
    """An upper bound on the walk's iterations: every iteration descends or advances one cell at
    its level, a ray crosses at most ``nx + ny + 2`` cells of a level, and descents per advance are
    at most ``nlevel``."""
    return (nlevel + 1) * 2 * (nrow + ncol + 2) + 8


def _once(x):
    """``x`` unchanged, computed once per loop iteration (XLA's CPU backend would otherwise fuse it
    into every consumer and recompute it there; it does not duplicate a division)."""
    return x / (1 + 0 * jnp.minimum(jnp.abs(x), 1))


def _interp(p, q, gp, gq):
    """The zero of the line through (p, gp), (q, gq); ``p`` where the line is flat."""
    den = gp - gq
    ok = den != 0
    return jnp.where(ok, p + (q - p) * (gp / jnp.where(ok, den, 1.0)), p)


#: rays walked together in one while loop (the loop runs until its slowest ray is done, so rays are
#: walked in chunks of neighbours: ~3x faster than one loop over a whole LiDAR scan, measured)
CHUNK = 1024
#: the level a walk starts at (cells of 2^START_LEVEL grid cells); it climbs from there as it skips
START_LEVEL = 99


def _walk_chunked(lo, ld, size, cells, planes, slope, t_limit, **static):
    """:func:`_walk` over rays in chunks of :data:`CHUNK` (``lax.map``); arrays (R,)."""
    n = lo[0].shape[0]
    if n <= CHUNK:
        return _walk(lo, ld, size, cells, planes, slope, t_limit, **static)
    m = -(-n // CHUNK)
    pad = m * CHUNK - n

    def split(a):
        a = jnp.concatenate([a, jnp.broadcast_to(a[:1], (pad,))]) if pad else a
        return a.reshape(m, CHUNK)
    xs = ([split(a) for a in lo], [split(a) for a in ld], split(t_limit))
    out = jax.lax.map(lambda x: _walk(x[0], x[1], size, cells, planes, slope, x[2], **static), xs)
    return tuple(a.reshape(-1)[:n] for a in out)


def _walk(lo, ld, size, cells, planes, slope, t_limit, *, nrow, ncol, level_offset, level_nx,
          count=False):
    """The surface walk for rays (R,) in the field's frame (see the module doc); ``cells``,
    ``planes`` and ``slope`` scaled to metres. Returns ``(t, cell, triangle_a)``: the crossing found
    (t inf: none), its cell ``row * nx + col`` and whether it lies on triangle A."""
    dtype = lo[0].dtype
    s0, s1, s2 = size[0], size[1], size[2]
    nx, ny = ncol - 1, nrow - 1
    nlevel = len(level_offset)
    top = nlevel - 1
    ox, oy, oz = lo
    vx, vy, vz = ld
    inf = jnp.asarray(jnp.inf, dtype)
    # the ray's interval inside the top box [-sx, sx] x [-sy, sy] x [0, top]
    tmin, tmax = -jnp.inf, jnp.inf
    for o_, v_, a_, b_ in ((ox, vx, -s0, s0), (oy, vy, -s1, s1), (oz, vz, 0.0 * s2, s2)):
        ok = jnp.abs(v_) > MINVAL
        inv = jnp.where(ok, 1.0 / jnp.where(ok, v_, 1.0), 0.0)
        a, b = (a_ - o_) * inv, (b_ - o_) * inv
        inside = (o_ >= a_) & (o_ <= b_)
        tmin = jnp.where(ok, jnp.maximum(tmin, jnp.minimum(a, b)), jnp.where(inside, tmin, jnp.inf))
        tmax = jnp.where(ok, jnp.minimum(tmax, jnp.maximum(a, b)), tmax)
    t0 = jnp.maximum(tmin, 0.0)
    t1 = jnp.minimum(tmax, t_limit)
    search = (t0 <= t1) & jnp.isfinite(t0)
    t0 = jnp.where(search, t0, 0.0)
    t1 = jnp.where(search, t1, 0.0)
    # grid coordinates: column x = (x + sx) / dx, row y = (y + sy) / dy
    gx0, gy0 = (ox + s0) * (nx / (2.0 * s0)), (oy + s1) * (ny / (2.0 * s1))
    gdx, gdy = vx * (nx / (2.0 * s0)), vy * (ny / (2.0 * s1))
    okx, oky = gdx != 0, gdy != 0
    ix, iy = (jnp.where(okx, 1.0 / jnp.where(okx, gdx, 1.0), 0.0),
              jnp.where(oky, 1.0 / jnp.where(oky, gdy, 1.0), 0.0))
    posx, posy = gdx > 0, gdy > 0
    rate = jnp.abs(gdx) + jnp.abs(gdy)
    w1 = gdx - gdy
    okw = jnp.abs(w1) > MINVAL
    iw = jnp.where(okw, 1.0 / jnp.where(okw, w1, 1.0), 0.0)
    i0 = jnp.clip(jnp.floor(gx0 + t0 * gdx), 0, nx - 1).astype(jnp.int32)
    j0 = jnp.clip(jnp.floor(gy0 + t0 * gdy), 0, ny - 1).astype(jnp.int32)
    off_tab = jnp.asarray(level_offset, jnp.int32)
    nx_tab = jnp.asarray(level_nx, jnp.int32)
    # a bound on the rounding of a slab test (the slabs are exact in exact arithmetic)
    eps = 64.0 * jnp.finfo(dtype).eps * (jnp.abs(oz) + jnp.abs(vz) * t1 + s2 + 1.0
                                         + slope * (nx + ny + jnp.abs(gx0) + jnp.abs(gy0) + rate * t1))
    # the rounding of one evaluation of the ray's height above the surface
    eps_g = 16.0 * jnp.finfo(dtype).eps * (jnp.abs(oz) + jnp.abs(vz) * t1 + s2)

    def body(c):
        it, t, i, j, lev, gprev, active, th = c
        at0 = lev == 0
        ci = jnp.right_shift(i, lev)
        cj = jnp.right_shift(j, lev)
        xlo = jnp.left_shift(ci, lev)
        ylo = jnp.left_shift(cj, lev)
        side = jnp.left_shift(1, lev)
        xhi = jnp.minimum(xlo + side, nx)
        yhi = jnp.minimum(ylo + side, ny)
        tx = jnp.where(okx, (jnp.where(posx, xhi, xlo) - gx0) * ix, inf)
        ty = jnp.where(oky, (jnp.where(posy, yhi, ylo) - gy0) * iy, inf)
        stepx = tx <= ty
        te = _once(jnp.maximum(jnp.minimum(jnp.minimum(tx, ty), t1), t))
        # the cell's slab: is the ray within e of its plane somewhere on [t, te]?
        sl = planes[off_tab[lev] + cj * nx_tab[lev] + ci]
        pc, pa, pb, pe = sl[:, 0], sl[:, 1], sl[:, 2], sl[:, 3]
        cx = xlo + 0.5 * side
        cy = ylo + 0.5 * side

        def gp(tt):
            return oz + tt * vz - (pc + pa * (gx0 + tt * gdx - cx) + pb * (gy0 + tt * gdy - cy))

        ga_p, gb_p = gp(t), gp(te)
        E = pe + eps
        E2 = E + eps
        overlap = at0 | ((jnp.minimum(ga_p, gb_p) <= E) & (jnp.maximum(ga_p, gb_p) >= -E))
        # where the ray enters and leaves the slab: descend there, to a level its stretch fits in
        G1 = vz - pa * gdx - pb * gdy
        dn, up_ = G1 < 0, G1 > 0
        iG = jnp.where(dn | up_, 1.0 / jnp.where(dn | up_, G1, 1.0), 0.0)
        t_in = t + jnp.where(ga_p > E2, (ga_p - E2) * -iG, jnp.where(ga_p < -E2, (-E2 - ga_p) * iG, 0.0))
        t_in = jnp.clip(jnp.where(jnp.isnan(t_in), t, t_in), t, te)
        t_out = jnp.where(dn, t + (ga_p + E2) * -iG, jnp.where(up_, t + (E2 - ga_p) * iG, te))
        t_out = jnp.clip(jnp.where(jnp.isnan(t_out), te, t_out), t_in, te)
        _, span_exp = jnp.frexp((t_out - t_in) * rate + 1.0)
        target = jnp.clip(span_exp.astype(jnp.int32) - 1, 0, lev - 1)
        # exact test of grid cell (i, j) on [t, te], in pieces split where the ray crosses the diagonal
        h = cells[j * nx + i]
        h00, h10, h01, h11 = h[:, 0], h[:, 1], h[:, 2], h[:, 3]
        u0 = gx0 - i
        v0 = gy0 - j
        w0 = u0 - v0
        tm = jnp.clip(jnp.where(okw, -w0 * iw, te), t, te)
        tri1 = (w0 + 0.5 * (t + tm) * w1) >= 0
        tri2 = (w0 + 0.5 * (tm + te) * w1) >= 0
        ax_a, ay_a = h10 - h00, h11 - h10
        ax_b, ay_b = h11 - h01, h01 - h00

        def g(tt, tri_a):
            return oz + tt * vz - (h00 + (u0 + tt * gdx) * jnp.where(tri_a, ax_a, ax_b)
                                   + (v0 + tt * gdy) * jnp.where(tri_a, ay_a, ay_b))

        ga = jnp.where(jnp.isnan(gprev), g(t, tri1), gprev)
        gm = g(tm, tri1)
        gb = _once(g(te, tri2))
        # a crossing inside a piece, or the ray touching the surface at a piece end (a ray that
        # only grazes the piecewise-planar surface touches it on an edge, a diagonal or a vertex)
        c1 = ((ga > 0) != (gm > 0)) | (jnp.abs(ga) <= eps_g)
        c2 = ((gm > 0) != (gb > 0)) | (jnp.abs(gm) <= eps_g) | (jnp.abs(gb) <= eps_g)
        # the decision, computed once: 0 move on, 1 descend, 2 found, 3 done (left the field), 4 idle
        i_n = jnp.where(stepx, jnp.where(posx, xhi, xlo - 1),
                        jnp.clip(jnp.floor(gx0 + te * gdx).astype(jnp.int32), xlo, xhi - 1))
        j_n = jnp.where(stepx, jnp.clip(jnp.floor(gy0 + te * gdy).astype(jnp.int32), ylo, yhi - 1),
                        jnp.where(posy, yhi, ylo - 1))
        leave = (te >= t1) | (i_n < 0) | (i_n >= nx) | (j_n < 0) | (j_n >= ny)
        found = at0 & (c1 | c2)
        code = jnp.where(overlap & ~at0, 1, jnp.where(found, 2, jnp.where(leave, 3, 0)))
        code = _once(jnp.where(active, code, 4).astype(dtype)).astype(jnp.int32)
        p_, q_ = jnp.where(c1, t, tm), jnp.where(c1, tm, te)
        gp_, gq_ = jnp.where(c1, ga, gm), jnp.where(c1, gm, gb)
        th = jnp.where(code == 2, _interp(p_, q_, gp_, gq_), th)
        move = code == 0
        down = code == 1
        # descending: jump to the slab entry, in the cell (clamped against rounding)
        tj = jnp.where(down, t_in, t)
        i_d = jnp.clip(jnp.floor(gx0 + tj * gdx).astype(jnp.int32), xlo, xhi - 1)
        j_d = jnp.clip(jnp.floor(gy0 + tj * gdy).astype(jnp.int32), ylo, yhi - 1)
        # moving on: to the next cell at this level, one level up when it has a new parent
        lev1 = lev + 1
        newparent = ((jnp.right_shift(i_n, lev1) != jnp.right_shift(ci, 1))
                     | (jnp.right_shift(j_n, lev1) != jnp.right_shift(cj, 1)))
        climb = jnp.where(newparent, jnp.minimum(lev1, top), lev)
        gprev = jnp.where(move, jnp.where(at0, gb, jnp.nan), jnp.where(down & (tj > t), jnp.nan, gprev))
        t = jnp.where(move | (code == 3), te, tj)
        i = jnp.where(move, i_n, jnp.where(down, i_d, i))
        j = jnp.where(move, j_n, jnp.where(down, j_d, j))
        lev = jnp.where(down, target, jnp.where(move, climb, lev))
        active = code <= 1
        return it + 1, t, i, j, lev, gprev, active, th

    cap = max_iterations(nrow, ncol, nlevel)

    def cond(c):
        return (c[0] < cap) & jnp.any(c[6])

    shape = ox.shape
    init = (jnp.int32(0), t0, i0, j0, jnp.full(shape, min(START_LEVEL, top), jnp.int32),
            jnp.full(shape, jnp.nan, dtype), search, jnp.full(shape, jnp.inf, dtype))
    it, _, i, j, _, _, _, th = jax.lax.while_loop(cond, body, init)
    if count:
        return it
    # the triangle of the hit: the side of the cell's diagonal the hit point lies on
    tf = jnp.where(jnp.isfinite(th), th, 0.0)
    tri_a = (gx0 + tf * gdx - i) >= (gy0 + tf * gdy - j)
    return th, j * nx + i, tri_a


def ray_hfield(lo, ld, size, cells, planes, slope, *, nrow: int, ncol: int, level_offset: tuple,
               level_nx: tuple, t_limit=jnp.inf):
    """Nearest hit of rays with one height field, in its geom frame.

    ``lo``, ``ld``: ray origins and directions, lists of 3 arrays (R,) (local frame; directions need
    not be unit); ``size`` (4,) the field's ``hfield_size``; ``cells``, ``planes``, ``slope``: its
    :func:`tables` as arrays (normalised); static ``nrow``, ``ncol`` and the pyramid layout.
    ``t_limit`` (R,) or scalar: nothing beyond it is searched for or returned (pass the nearest hit
    of the other geoms and the range).
    Returns ``t`` (R,) (inf: miss) and the local outward normal, a list of 3 arrays (R,)."""
    dtype = lo[0].dtype
    s0, s1, s2, s3 = (size[k].astype(dtype) for k in range(4))
    nx, ny = ncol - 1, nrow - 1
    dxm, dym = 2.0 * s0 / nx, 2.0 * s1 / ny
    ox, oy, oz = lo
    vx, vy, vz = ld
    zero = jnp.zeros_like(ox)
    one = jnp.ones_like(ox)
    cells = cells.astype(dtype) * s2
    # ---- base box (-base <= z <= 0) and the side walls of the top box, both differentiable
    half = [s0 * one, s1 * one, 0.5 * s3 * one]
    t_base = ray_box([ox, oy, oz + 0.5 * s3], ld, half)
    t_side = jnp.full_like(ox, jnp.inf)
    n_side = [zero, zero, zero]
    for axis, sign in ((0, -1.0), (0, 1.0), (1, -1.0), (1, 1.0)):
        o_a, v_a = (ox, vx) if axis == 0 else (oy, vy)
        o_b, v_b = (oy, vy) if axis == 0 else (ox, vx)
        ext_a, ext_b = (s0, s1) if axis == 0 else (s1, s0)
        ok = jnp.abs(v_a) > MINVAL
        t = jnp.where(ok, (sign * ext_a - o_a) / jnp.where(ok, v_a, 1.0), -1.0)
        tf = jnp.where(ok & (t >= 0), t, 0.0)
        pb = o_b + tf * v_b
        pz = oz + tf * vz
        # the edge profile at pb: linear between the samples of the edge row / column
        step = dym if axis == 0 else dxm
        ncell = ny if axis == 0 else nx
        q = (pb + ext_b) / step
        k = jnp.clip(jnp.floor(q), 0, ncell - 1)
        ki = k.astype(jnp.int32)
        if axis == 0:
            idx = ki * nx + (0 if sign < 0 else nx - 1)
            a_col, b_col = (0, 2) if sign < 0 else (1, 3)
        else:
            idx = (0 if sign < 0 else (ny - 1) * nx) + ki
            a_col, b_col = (0, 1) if sign < 0 else (2, 3)
        c = cells[jax.lax.stop_gradient(idx)]
        prof = c[:, a_col] * (k + 1 - q) + c[:, b_col] * (q - k)
        hit = (ok & (t >= 0) & (jnp.abs(pb) <= ext_b) & (jnp.abs(pz - 0.5 * s2) <= 0.5 * s2)
               & (pz < prof))
        t = jnp.where(hit, t, jnp.inf)
        better = t < t_side
        t_side = jnp.where(better, t, t_side)
        n_side[axis] = jnp.where(better, sign, n_side[axis])
        n_side[1 - axis] = jnp.where(better, 0.0, n_side[1 - axis])
    t_other = jnp.minimum(t_base, t_side)
    # ---- the surface: walk the pyramid (no gradient), recompute on the found triangle
    sg = jax.lax.stop_gradient
    th, hcell, htri = _walk_chunked(
        [sg(a) for a in lo], [sg(a) for a in ld], sg(size.astype(dtype)), sg(cells),
        sg(planes.astype(dtype) * s2), sg(jnp.asarray(slope, dtype) * s2),
        sg(jnp.broadcast_to(jnp.minimum(t_other, t_limit), ox.shape)), nrow=nrow, ncol=ncol,
        level_offset=level_offset, level_nx=level_nx)
    surf = jnp.isfinite(th)
    # ---- the found triangle's plane: distance (differentiable) and normal (MuJoCo's: always up)
    h = cells[hcell]
    h00, h10, h01, h11 = h[:, 0], h[:, 1], h[:, 2], h[:, 3]
    ci = (hcell % nx).astype(dtype)
    cj = (hcell // nx).astype(dtype)
    ax = jnp.where(htri, h10 - h00, h11 - h01) / dxm  # dz/dx on the triangle
    ay = jnp.where(htri, h11 - h10, h01 - h00) / dym  # dz/dy
    z_o = h00 + ax * (ox + s0 - ci * dxm) + ay * (oy + s1 - cj * dym)
    G0 = oz - z_o
    G1 = vz - ax * vx - ay * vy
    okg = jnp.abs(G1) > MINVAL
    tp = jnp.where(okg, -G0 / jnp.where(okg, G1, 1.0), th)
    # the plane's distance where it agrees with the walk's (a grazing ray: the walk's)
    vn = jnp.sqrt(vx * vx + vy * vy + vz * vz)
    tol = 1e-3 * (dxm + dym) / jnp.where(vn > 0, vn, 1.0)
    tp = jnp.where(okg & (jnp.abs(tp - th) <= sg(tol)), tp, th)
    t_surf = jnp.where(surf, tp, jnp.inf)
    n_surf = [-ax, -ay, one]
    nn = jnp.sqrt(ax * ax + ay * ay + 1.0)
    n_surf = [c / nn for c in n_surf]
    # ---- nearest of surface, sides and base
    t_best = jnp.minimum(jnp.minimum(t_surf, t_side), t_base)
    t_best = jnp.where(t_best <= t_limit, t_best, jnp.inf)      # past the limit nothing was searched
    pick_surf = surf & (t_surf <= t_side) & (t_surf <= t_base)
    pick_side = ~pick_surf & (t_side <= t_base) & jnp.isfinite(t_side)
    tb = jnp.where(jnp.isfinite(t_base), t_base, 0.0)
    n_base = local_normal(BOX, [ox + tb * vx, oy + tb * vy, oz + 0.5 * s3 + tb * vz], half)
    normal = [jnp.where(pick_surf, n_surf[k], jnp.where(pick_side, n_side[k], n_base[k])) for k in range(3)]
    miss = ~jnp.isfinite(t_best)
    normal = [jnp.where(miss, 0.0, n) for n in normal]
    return t_best, normal
