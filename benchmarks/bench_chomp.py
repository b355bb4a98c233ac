"""CHOMP: the covariant update (the default) against Adam on the seeded benchmark problems.

For each set (collide_arm under the bar; panda among boxes) both updates solve the same problems
from the same initialisations (``trajopt``: 8 inits, 200 steps, exact check at the set's
resolution). Per problem, on the returned path's cost trace:

* ``own``: iterations until the cost is within ``--rtol`` (1%) of the run's final cost and stays
  there (how soon the update settles);
* ``common``: iterations until the cost first comes within ``--rtol`` of the lower of the two
  updates' final costs for that problem (how soon it reaches the better answer; "never" counted
  as the iteration budget);

plus success (collision-free under the exact colliders) and the final cost. Medians are printed.

    python benchmarks/bench_chomp.py --n 8 --panda 4
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from caliper_jax.planning import Checker
from caliper_jax.planning.problems import collide_arm_problems, panda_problems
from caliper_jax.trajopt import ChompOptions, trajopt

# "covariant+fallback" is the default: covariant, then adam for the problems it left in collision
UPDATES = ("adam", "covariant", "covariant+fallback")


def settle(trace, final, rtol):
    """First iteration from which the trace stays within rtol of ``final``."""
    off = np.abs(trace - final) > rtol * max(abs(final), 1e-12)
    return int(np.nonzero(off)[0][-1] + 1) if off.any() else 0


def reach(trace, target, rtol):
    hit = np.nonzero(trace <= target + rtol * max(abs(target), 1e-12))[0]
    return int(hit[0]) if hit.size else len(trace)


def run_set(ps, iterations, inits, rtol):
    exact = ps.collision_model()
    spheres = ps.sphere_model()
    checker = Checker(ps.model, exact, resolution=ps.resolution, batch=256)
    out = {}
    for update in UPDATES:
        opts = ChompOptions(update=update.split("+")[0], iterations=iterations, fallback="+" in update)
        t = time.perf_counter()
        res = trajopt(ps.model, ps.starts, ps.goals, inits=inits, seed=0, opts=opts, spheres=spheres,
                      checker=checker)
        out[update] = (res, time.perf_counter() - t)
    best = np.min([out[u][0].costs for u in UPDATES], axis=0)
    print(f"\n{ps.name}: {len(ps)} problems, {inits} inits, {iterations} steps, rtol {rtol:g}")
    print(f"{'update':>20} {'success':>8} {'own (median)':>13} {'common (median)':>16} "
          f"{'final cost (median)':>20} {'time s (incl. compile)':>23} {'fell back':>9}")
    for update in UPDATES:
        res, secs = out[update]
        own = [settle(res.trace[p], res.costs[p], rtol) for p in range(len(ps))]
        common = [reach(res.trace[p], best[p], rtol) for p in range(len(ps))]
        fell = int(res.fell_back.sum()) if res.fell_back is not None else 0
        print(f"{update:>20} {int(res.success.sum()):>4}/{len(ps):<3} {np.median(own):>13.0f} "
              f"{np.median(common):>16.0f} {np.median(res.costs):>20.4g} {secs:>23.1f} {fell:>9}")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=16, help="collide_arm problems")
    ap.add_argument("--panda", type=int, default=8, help="panda problems (0: skip)")
    ap.add_argument("--inits", type=int, default=8)
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--rtol", type=float, default=0.01)
    args = ap.parse_args(argv)
    run_set(collide_arm_problems(args.n, seed=0), args.iterations, args.inits, args.rtol)
    if args.panda:
        run_set(panda_problems(args.panda, seed=0), args.iterations, args.inits, args.rtol)


if __name__ == "__main__":
    main()
