"""Where the MJX compile time of a task's jitted step goes (issue 31: <= 60 s on 2 CPU cores).

    python benchmarks/bench_mjx_compile.py [--tasks panda-lift-cube panda-insert-peg]
                                           [--parts env raw collision] [--worlds 1] [--json]

Per task, on the MJX engine's scene (the arm's primitive collision model), one world, the task's
declared randomisation:
- ``env``: :meth:`tasks.env_mjx.MjxEnv.jit_step` (a control tick: gate, grasp, ``substeps``
  physics steps in a ``lax.fori_loop``, predicate, reward, branch-free auto-reset);
- ``raw``: ``jax.jit(mjx.step)`` on the same mjx.Model, no env around it (one physics step);
- ``collision``: ``jax.jit(mjx.collision)`` alone.
Each row times ``jit(f).lower(...)`` (tracing + StableHLO) and ``.compile()`` (XLA) apart, counts
the lowered module's lines (a size proxy), and for ``env`` the run time of one tick (best of 3,
after the compile). The scene's collision function groups (MJX compiles one collider per
(geom types, condim) group) and solver options are printed too. Compile times are wall clock and
move with the machine's load: compare rows of one run.
"""
from __future__ import annotations

import argparse
import json
import os
import time

PARTS = ("env", "raw", "collision")


def scene_summary(mj) -> dict:
    """Collision groups {"type1-type2/condim": pairs} and the solver options of a compiled MjModel."""
    import mujoco
    from mujoco.mjx._src.collision_driver import _geom_groups

    names = {int(v): k.removeprefix("mjGEOM_").lower() for k, v in mujoco.mjtGeom.__members__.items()}
    groups = {f"{names[int(k.types[0])]}-{names[int(k.types[1])]}/{int(k.condim)}": len(v)
              for k, v in _geom_groups(mj).items()}
    o = mj.opt
    return {"ngeom": int(mj.ngeom), "groups": groups, "pairs": sum(groups.values()),
            "solver": ("pgs", "cg", "newton")[int(o.solver)], "iterations": int(o.iterations),
            "ls_iterations": int(o.ls_iterations), "cone": ("pyramidal", "elliptic")[int(o.cone)]}


def timed_compile(fn, *args) -> dict:
    import jax

    t0 = time.perf_counter()
    low = jax.jit(fn).lower(*args)
    t1 = time.perf_counter()
    lines = low.as_text().count("\n")
    t2 = time.perf_counter()
    exe = low.compile()
    t3 = time.perf_counter()
    return {"lower_s": t1 - t0, "compile_s": t3 - t2, "hlo_lines": lines, "exe": exe}


def bench_task(name: str, parts, worlds: int) -> dict:
    import jax

    from mjx_backend.versions import import_mjx
    from tasks.env_common import resolve_task

    mjx = import_mjx()
    t0 = time.perf_counter()
    ts = resolve_task(name, mjx=True)
    row = {"task": name, "build_s": time.perf_counter() - t0, **scene_summary(ts.scene.mj)}
    if "env" in parts:
        from tasks.env_mjx import MjxEnv

        env = MjxEnv(ts, worlds)
        st = jax.block_until_ready(env.jit_reset(jax.random.PRNGKey(0)))
        action = jax.numpy.tile(jax.numpy.asarray(ts.q0, st.target.dtype), (worlds, 1))
        r = timed_compile(env.step_state, st, action)
        exe = r.pop("exe")
        best = float("inf")
        for _ in range(3):
            t = time.perf_counter()
            st = jax.block_until_ready(exe(st, action))
            best = min(best, time.perf_counter() - t)
        row["env"] = {**r, "tick_ms": 1e3 * best, "substeps": env.layout.substeps}
    if {"raw", "collision"} & set(parts):
        mx = mjx.put_model(ts.scene.mj)
        d = mjx.kinematics(mx, mjx.make_data(mx))
        for part, fn in (("raw", mjx.step), ("collision", mjx.collision)):
            if part in parts:
                r = timed_compile(lambda d, fn=fn: fn(mx, d), d)
                r.pop("exe")
                row[part] = r
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", nargs="+", default=["panda-lift-cube", "panda-insert-peg"])
    ap.add_argument("--parts", nargs="+", choices=PARTS, default=["env"])
    ap.add_argument("--worlds", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rows = [bench_task(t, args.parts, args.worlds) for t in args.tasks]
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"1-min load {load:.1f}; {args.worlds} world(s)")
    for r in rows:
        print(f"\n{r['task']}: {r['ngeom']} geoms, {r['pairs']} pairs, solver {r['solver']} "
              f"{r['iterations']}/{r['ls_iterations']}, {r['cone']}; build {r['build_s']:.1f} s")
        print("  groups: " + ", ".join(f"{k} x{v}" for k, v in r["groups"].items()))
        print(f"  {'part':<10} {'lower s':>8} {'compile s':>10} {'hlo lines':>10} {'run':>14}")
        for part in PARTS:
            if part in r:
                p = r[part]
                run = f"{p['tick_ms']:.1f} ms/tick" if "tick_ms" in p else ""
                print(f"  {part:<10} {p['lower_s']:8.1f} {p['compile_s']:10.1f} {p['hlo_lines']:10d}"
                      f" {run:>14}")


if __name__ == "__main__":
    main()
