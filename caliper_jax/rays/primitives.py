"""Ray-primitive intersection in a geom's local frame, MuJoCo semantics, elementwise over any shape.

Every function takes the ray origin ``o`` and direction ``d`` already expressed in the geom's
frame, components first (``(3, ...)``: contiguous rows that XLA's CPU backend vectorises; ``d``
need not be unit length) and the geom's MuJoCo ``size`` (``(3, ...)``, broadcastable),
and returns the ray parameter ``t`` of the first surface crossing with ``t >= 0`` (the hit point is
``o + t d``), ``inf`` on a miss. A ray that starts inside a closed solid returns its exit point,
as ``mj_ray`` does. Planes are one-sided: only a ray travelling towards -z (local) from the +z side
hits, and a plane with ``size[0] > 0`` (``size[1] > 0``) is bounded to ``|x| <= size[0]``
(``|y| <= size[1]``).

All square roots and divisions are double-``where`` guarded, so ``jax.grad`` of a distance with
respect to poses is finite everywhere (zero where the ray misses).
:func:`local_normal` gives the outward unit normal at a local hit point, per geom type.
"""
from __future__ import annotations

import jax.numpy as jnp

#: MuJoCo geom type codes (mjtGeom) handled here.
PLANE, HFIELD, SPHERE, CAPSULE, ELLIPSOID, CYLINDER, BOX, MESH = 0, 1, 2, 3, 4, 5, 6, 7
#: MuJoCo's smallest meaningful value (mjMINVAL): parallel rays and tangent discriminants.
MINVAL = 1e-15


def _div(a, b, ok):
    """a / b where ``ok``, inf elsewhere; finite gradients on both branches."""
    return jnp.where(ok, a / jnp.where(ok, b, 1.0), jnp.inf)


def _sqrt(x):
    ok = x > 0
    return jnp.where(ok, jnp.sqrt(jnp.where(ok, x, 1.0)), 0.0)


def dot(a, b):
    """Dot product over the leading (component) axis."""
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def _first(*ts):
    """Smallest candidate; candidates are ``inf`` when invalid."""
    out = ts[0]
    for t in ts[1:]:
        out = jnp.minimum(out, t)
    return out


def _keep(t, ok):
    return jnp.where(ok & (t >= 0), t, jnp.inf)


def _finite(t):
    return jnp.where(jnp.isfinite(t), t, 0.0)


def _quadratic(a, b, c):
    """Roots of ``a t^2 + 2 b t + c`` (a > 0), near then far; inf when there is none."""
    det = b * b - a * c
    ok = (det >= MINVAL) & (a > MINVAL)
    s = _sqrt(jnp.where(ok, det, 0.0))
    return _div(-b - s, a, ok), _div(-b + s, a, ok)


def _nearest_root(a, b, c):
    t0, t1 = _quadratic(a, b, c)
    return jnp.where(t0 >= 0, t0, jnp.where(t1 >= 0, t1, jnp.inf))


def ray_plane(o, d, size):
    ok = d[2] < -MINVAL
    t = _keep(_div(-o[2], d[2], ok), ok)
    tf = _finite(t)
    x = o[0] + tf * d[0]
    y = o[1] + tf * d[1]
    inside = (((size[0] <= 0) | (jnp.abs(x) <= size[0]))
              & ((size[1] <= 0) | (jnp.abs(y) <= size[1])))
    return jnp.where(inside, t, jnp.inf)


def ray_sphere(o, d, size):
    r = size[0]
    return _nearest_root(dot(d, d), dot(d, o), dot(o, o) - r * r)


def ray_ellipsoid(o, d, size):
    s = [jnp.where(size[i] > 0, size[i], 1.0) for i in range(3)]
    os_ = [o[i] / s[i] for i in range(3)]
    ds = [d[i] / s[i] for i in range(3)]
    return _nearest_root(dot(ds, ds), dot(ds, os_), dot(os_, os_) - 1.0)


def _side(o, d, r, h):
    """The lateral surface of the z-axis cylinder of radius r, |z| <= h: both crossings."""
    a = d[0] * d[0] + d[1] * d[1]
    b = d[0] * o[0] + d[1] * o[1]
    c = o[0] * o[0] + o[1] * o[1] - r * r
    return [_keep(t, jnp.abs(o[2] + _finite(t) * d[2]) <= h) for t in _quadratic(a, b, c)]


def ray_capsule(o, d, size):
    r, h = size[0], size[1]
    cands = _side(o, d, r, h)
    a = dot(d, d)
    for sign in (1.0, -1.0):
        oc = (o[0], o[1], o[2] - sign * h)
        for t in _quadratic(a, dot(d, oc), dot(oc, oc) - r * r):
            cands.append(_keep(t, sign * (o[2] + _finite(t) * d[2]) >= h))
    return _first(*cands)


def ray_cylinder(o, d, size):
    r, h = size[0], size[1]
    cands = _side(o, d, r, h)
    ok = jnp.abs(d[2]) > MINVAL
    for sign in (1.0, -1.0):
        t = _div(sign * h - o[2], d[2], ok)
        tf = _finite(t)
        x = o[0] + tf * d[0]
        y = o[1] + tf * d[1]
        cands.append(_keep(t, ok & (x * x + y * y <= r * r)))
    return _first(*cands)


def ray_box(o, d, size):
    """Slab method: entry = largest near-face parameter, exit = smallest far-face parameter; the
    first crossing with t >= 0 (the entry, or the exit from inside). Axes with ``|d_i| <= MINVAL``
    never bound the ray, as in MuJoCo's face-by-face test; they must lie inside their slab."""
    near, far, inside = -jnp.inf, jnp.inf, True
    for i in range(3):
        ok = jnp.abs(d[i]) > MINVAL
        inv = jnp.where(ok, 1.0 / jnp.where(ok, d[i], 1.0), 0.0)
        t0 = (-size[i] - o[i]) * inv
        t1 = (size[i] - o[i]) * inv
        near = jnp.where(ok, jnp.maximum(near, jnp.minimum(t0, t1)), near)
        far = jnp.where(ok, jnp.minimum(far, jnp.maximum(t0, t1)), far)
        inside = inside & (ok | (jnp.abs(o[i]) <= size[i]))
    hit = inside & (far >= jnp.maximum(near, 0.0))
    return jnp.where(hit, jnp.where(near >= 0, near, far), jnp.inf)


#: type code -> intersection function (meshes live in :mod:`caliper_jax.rays.mesh`)
PRIMITIVES = {PLANE: ray_plane, SPHERE: ray_sphere, CAPSULE: ray_capsule, ELLIPSOID: ray_ellipsoid,
              CYLINDER: ray_cylinder, BOX: ray_box}


def _unit(v):
    n2 = dot(v, v)
    ok = n2 > 0
    inv = jnp.where(ok, 1.0 / _sqrt(jnp.where(ok, n2, 1.0)), 0.0)
    return [v[i] * inv for i in range(3)]


def local_normal(code: int, p, size):
    """Outward unit normal (list of 3 arrays) at local hit point ``p`` (3, ...) of a primitive of
    the static type ``code``, size ``size`` (3, ...). Meshes: zeros (the normal comes from the
    triangle)."""
    zero = jnp.zeros_like(p[0])
    one = jnp.ones_like(p[0])
    if code == PLANE:
        return [zero, zero, one]
    if code == SPHERE:
        return _unit(p)
    if code == ELLIPSOID:
        s = [jnp.where(size[i] > 0, size[i], 1.0) for i in range(3)]
        return _unit([p[i] / (s[i] * s[i]) for i in range(3)])
    if code == CAPSULE:
        h = size[1]
        return _unit([p[0], p[1], p[2] - jnp.clip(p[2], -h, h)])
    if code == CYLINDER:
        rr = _sqrt(p[0] * p[0] + p[1] * p[1])
        cap = jnp.abs(jnp.abs(p[2]) - size[1]) < jnp.abs(rr - size[0])
        radial = _unit([p[0], p[1], zero])
        return [jnp.where(cap, 0.0, radial[0]), jnp.where(cap, 0.0, radial[1]),
                jnp.where(cap, jnp.sign(p[2]), 0.0)]
    if code == BOX:
        q = [jnp.abs(p[i]) / jnp.where(size[i] > 0, size[i], 1.0) for i in range(3)]
        x_ = (q[0] >= q[1]) & (q[0] >= q[2])
        y_ = ~x_ & (q[1] >= q[2])
        z_ = ~x_ & ~y_
        return [jnp.where(x_, jnp.sign(p[0]), 0.0), jnp.where(y_, jnp.sign(p[1]), 0.0),
                jnp.where(z_, jnp.sign(p[2]), 0.0)]
    return [zero, zero, zero]
