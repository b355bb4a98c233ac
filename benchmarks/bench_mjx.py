"""Contact-simulation throughput: world-steps per second of MuJoCo on the CPU and of MJX.

    python benchmarks/bench_mjx.py [--robot panda] [--batches 1 64 256] [--steps 100]
                                   [--contact --ground 0 --props 2] [--mjx-batch 2] [--mjx-steps 10]
                                   [--mjx-timeout 300] [--no-mjx] [--no-native] [--json]

Rows (all on the same compiled scene, controls held at zero torque):
- ``cpu loop``: one world, ``mj_step`` in a Python loop -- directly, and through ``MujocoBackend``;
- ``rollout``: ``mujoco.rollout`` with ``os.cpu_count()`` threads over B worlds x ``--steps``
  steps -- directly (persistent pool, pre-allocated outputs) and through ``MujocoBackend``
  (one ``step(steps * h)`` call); the overhead column is backend time / direct time - 1;
- ``mjx``: ``MjxBackend`` (jit(vmap(mjx.step)), fori_loop of ``--mjx-steps`` per call), compile
  time separate; run in a child process killed after ``--mjx-timeout`` seconds;
- ``native``: caliper's own JAX simulator (semi-implicit Euler, no contacts) vmapped over worlds.
Higher is better. Figures recorded in docs/mujoco.md.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np


def scene_for(args):
    import jax

    jax.config.update("jax_enable_x64", True)
    from caliper_jax.loading import load
    from mjx_backend.layout import compile_scene
    from mjx_backend.scene import Prop

    model = load(args.robot)
    props = [Prop.box(f"box{i}", (0.03, 0.03, 0.03), (0.5, -0.2 + 0.2 * i, 0.03), material="wood")
             for i in range(args.props)]
    return model, compile_scene(model, actuators="motor", ground=args.ground, props=props,
                                options=dict(contact=args.contact))


def best_of(fn, repeats=3, setup=None):
    """Fastest of ``repeats`` timed calls, each after ``setup()`` (untimed)."""
    times = []
    for _ in range(repeats):
        if setup is not None:
            setup()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def paired(a, b, repeats=5, setup_a=None, setup_b=None):
    """Fastest times of two alternatives timed alternately (a shared, noisy machine drifts)."""
    ta, tb = [], []
    for _ in range(repeats):
        ta.append(best_of(a, 1, setup_a))
        tb.append(best_of(b, 1, setup_b))
    return min(ta), min(tb)


def bench_cpu(args, scene):
    """Both paths start every timed repetition from the same reset state."""
    import mujoco
    import mujoco.rollout

    from mjx_backend.cpu import MujocoBackend

    rows = []
    mj, h, n = scene.mj, scene.timestep, args.steps
    d = mujoco.MjData(mj)
    b = MujocoBackend(scene, 1, rollout=False)

    def direct_loop():
        for _ in range(n):
            mujoco.mj_step(mj, d)

    def backend_loop():
        for _ in range(n):
            b.step(h)

    t_direct, t_backend = paired(direct_loop, backend_loop, setup_a=lambda: mujoco.mj_resetData(mj, d),
                                 setup_b=lambda: (b.reset(), b.enable()))
    rows.append(dict(path="cpu loop (mj_step)", batch=1, direct=n / t_direct, backend=n / t_backend,
                     overhead=t_backend / t_direct - 1))
    nthread = os.cpu_count() or 1
    S = mujoco.mjtState
    spec = int(S.mjSTATE_CTRL | S.mjSTATE_QFRC_APPLIED | S.mjSTATE_EQ_ACTIVE)
    nstate = mujoco.mj_stateSize(mj, int(S.mjSTATE_FULLPHYSICS))
    state0 = np.empty(nstate)
    mujoco.mj_resetData(mj, d)
    mujoco.mj_getState(mj, d, state0, int(S.mjSTATE_FULLPHYSICS))
    pool = mujoco.rollout.Rollout(nthread=nthread)
    datas = [mujoco.MjData(mj) for _ in range(max(1, nthread))]
    for B in args.batches:
        inputs = dict(model=[mj] * B, data=datas, initial_state=np.tile(state0, (B, 1)),
                      control=np.zeros((B, n, mujoco.mj_stateSize(mj, spec))), control_spec=spec,
                      skip_checks=True, nstep=n, initial_warmstart=np.zeros((B, mj.nv)),
                      state=np.empty((B, n, nstate)), sensordata=np.empty((B, n, mj.nsensordata)))
        bb = MujocoBackend(scene, B, rollout=True, nthread=nthread)
        t_direct, t_backend = paired(lambda inputs=inputs: pool.rollout(**inputs),
                                     lambda bb=bb: bb.step(n * h),
                                     setup_b=lambda bb=bb: (bb.reset(), bb.enable()))
        bb.close()
        rows.append(dict(path=f"rollout ({nthread} threads)", batch=B, direct=B * n / t_direct,
                         backend=B * n / t_backend, overhead=t_backend / t_direct - 1))
    pool.close()
    return rows


def bench_mjx_child(args):
    """Runs in a child process: prints one JSON line per batch."""
    import jax

    model, scene = scene_for(args)
    from mjx_backend.mjx_sim import MjxBackend

    h = scene.timestep
    B, n = args.mjx_batch, args.mjx_steps
    t0 = time.perf_counter()
    b = MjxBackend(scene, B)
    put_s = time.perf_counter() - t0
    b.enable()
    t0 = time.perf_counter()
    b.step(n * h)
    first_s = time.perf_counter() - t0
    t_run = best_of(lambda: (b.step(n * h), jax.block_until_ready(b.data().qpos)))
    print(json.dumps(dict(path=f"mjx ({jax.default_backend()}, {b.impl or 'default'} impl)", batch=B,
                          backend=B * n / t_run, compile_s=first_s, put_s=put_s)), flush=True)


def bench_mjx(args):
    cmd = [sys.executable, __file__, "--mjx-child", "--robot", args.robot, "--ground",
           str(args.ground) if args.ground is not None else "none", "--props", str(args.props),
           "--mjx-batch", str(args.mjx_batch), "--mjx-steps", str(args.mjx_steps)]
    if args.contact:
        cmd.append("--contact")
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.mjx_timeout, check=True)
    except subprocess.TimeoutExpired:
        return [dict(path="mjx", batch=args.mjx_batch, note=f"skipped: exceeded {args.mjx_timeout} s")]
    except subprocess.CalledProcessError as exc:
        return [dict(path="mjx", batch=args.mjx_batch, note="failed: " + exc.stderr.strip().splitlines()[-1])]
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def bench_native(args, model):
    import jax
    import jax.numpy as jnp

    from caliper_jax import integrators
    from caliper_jax.configuration import neutral

    rows = []
    n, h = args.steps, 0.002
    for B in args.native_batches:
        q0 = jnp.tile(neutral(model), (B, 1))
        v0 = jnp.zeros((B, model.nv))
        taus = jnp.zeros((B, n, model.nv))
        f = jax.jit(jax.vmap(lambda q, v, t: integrators.simulate(model, q, v, t, h)[0][-1]))
        t0 = time.perf_counter()
        compiled = f.lower(q0, v0, taus).compile()
        compile_s = time.perf_counter() - t0
        t_run = best_of(lambda c=compiled, a=(q0, v0, taus): jax.block_until_ready(c(*a)))
        rows.append(dict(path="native jax (no contacts)", batch=B, backend=B * n / t_run,
                         compile_s=compile_s))
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--robot", default="panda")
    p.add_argument("--batches", type=int, nargs="+", default=[1, 64, 256])
    p.add_argument("--native-batches", type=int, nargs="+", default=[1, 64])
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--contact", action="store_true", help="enable contacts (default: off)")
    p.add_argument("--ground", default=None, help="ground height (default: none)")
    p.add_argument("--props", type=int, default=0, help="number of boxes on the ground")
    p.add_argument("--mjx-batch", type=int, default=2)
    p.add_argument("--mjx-steps", type=int, default=10)
    p.add_argument("--mjx-timeout", type=float, default=300.0)
    p.add_argument("--no-mjx", action="store_true")
    p.add_argument("--no-native", action="store_true")
    p.add_argument("--mjx-child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    args.ground = None if args.ground in (None, "none") else float(args.ground)
    if args.mjx_child:
        bench_mjx_child(args)
        return 0
    import mujoco

    model, scene = scene_for(args)
    rows = bench_cpu(args, scene)
    if not args.no_mjx:
        rows += bench_mjx(args)
    if not args.no_native:
        rows += bench_native(args, model)
    meta = dict(robot=args.robot, nv=scene.mj.nv, contact=args.contact, ground=args.ground, props=args.props,
                steps=args.steps, timestep=scene.timestep, mujoco=mujoco.__version__, cpus=os.cpu_count())
    if args.json:
        print(json.dumps(dict(meta=meta, rows=rows), indent=2))
        return 0
    print(" ".join(f"{k}={v}" for k, v in meta.items()))
    print(f"{'path':<34}{'batch':>7}{'direct':>14}{'backend':>14}{'overhead':>10}{'compile s':>11}")
    for r in rows:
        if "note" in r:
            print(f"{r['path']:<34}{r['batch']:>7}  {r['note']}")
            continue
        direct = f"{r['direct']:>14,.0f}" if "direct" in r else f"{'':>14}"
        over = f"{100 * r['overhead']:>9.1f}%" if "overhead" in r else f"{'':>10}"
        comp = f"{r['compile_s']:>11.1f}" if "compile_s" in r else f"{'':>11}"
        print(f"{r['path']:<34}{r['batch']:>7}{direct}{r['backend']:>14,.0f}{over}{comp}")
    print("figures: world-steps per second (higher is better)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
