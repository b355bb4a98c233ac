"""Core throughput: our FK / Jacobian / RNEA / CRBA / ABA on a robot at several batch sizes in
float32 and float64 (jit compile time reported separately), beside Pinocchio (per-call Python
loop and its threaded rneaInParallel / abaInParallel on the same cores) and MJX kinematics /
forward with contacts disabled.

    python benchmarks/bench_core.py [--robot panda] [--batches 1 64 1024 4096] [--no-mjx]
                                    [--host-devices 2] [--part all|throughput|latency]
                                    [--sync-dispatch]

Figures are configurations per second (higher is better), timed two ways: pipelined (calls queued
back to back, one wait per round) and waiting for every result before the next call. ``fd`` is the
default ``forward_dynamics`` (vmapped: the ABA lane kernel), ``fd_cholesky`` CRBA + Cholesky.
Results: benchmarks/README.md.
``--host-devices N`` splits the CPU into N XLA devices and shards the batch over them (one jitted
call, N cores busy -- XLA's CPU backend otherwise runs these small fused kernels on one core);
Pinocchio's parallel figures use the same number of threads.

``--part latency`` (also run by the default ``--part all``, after the throughput figures): batch-1
latency per call, microseconds (lower is better), median and p90 of single timed calls, rounds
interleaved with Pinocchio's per-call loop on the same configuration: ours through
``caliper_jax.single.single_call`` (NumPy in, NumPy out; ``raw``: a ``jax.Array`` already on the
device in, the ``jax.Array`` out, waited for), ``jit(model, ...)`` the plain jitted call with the
Model as an argument, and the ratio ours / Pinocchio. ``--sync-dispatch`` sets
``jax_cpu_enable_async_dispatch`` off (read before JAX starts): executables run on the calling
thread.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from functools import partial


def _host_devices(argv) -> int:
    """--host-devices must reach XLA before JAX starts, so it is read ahead of argparse."""
    for i, arg in enumerate(argv):
        if arg == "--host-devices" and i + 1 < len(argv):
            return int(argv[i + 1])
        if arg.startswith("--host-devices="):
            return int(arg.split("=", 1)[1])
    return 1


if "--sync-dispatch" in sys.argv:
    os.environ["JAX_CPU_ENABLE_ASYNC_DISPATCH"] = "false"
if _host_devices(sys.argv) > 1:
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                               f" --xla_force_host_platform_device_count={_host_devices(sys.argv)}")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec  # noqa: E402

jax.config.update("jax_enable_x64", True)  # float64 is benchmarked too; float32 stays float32

from caliper_jax import configuration, dynamics, kinematics  # noqa: E402
from caliper_jax.loading import load  # noqa: E402

OPS = {
    "fk": (lambda m, q, v: kinematics.forward_kinematics(m, q)),
    "jacobian": (lambda m, q, v: kinematics.frame_jacobian(m, q, m.nframe - 1)),
    "rnea": (lambda m, q, v: dynamics.rnea(m, q, v, v)),
    "crba": (lambda m, q, v: dynamics.crba(m, q)),
    "aba": (lambda m, q, v: dynamics.aba(m, q, v, v)),
    "fd_cholesky": (lambda m, q, v: dynamics.forward_dynamics_cholesky(m, q, v, v)),
    "fd": (lambda m, q, v: dynamics.forward_dynamics(m, q, v, v)),     # the default (ABA lanes)
}


def timed(fn, *args, min_time=1.0, rounds=5):
    """Seconds per call: the best of ``rounds`` rounds of at least ``min_time`` / ``rounds`` s
    each (the machine's background noise only ever slows a round down)."""
    jax.block_until_ready(fn(*args))
    best = float("inf")
    for _ in range(rounds):
        n, start = 0, time.perf_counter()
        while True:
            out = fn(*args)
            n += 1
            if time.perf_counter() - start > min_time / rounds and n >= 3:
                break
        jax.block_until_ready(out)
        best = min(best, (time.perf_counter() - start) / n)
    return best


def timed_waiting(fn, *args, min_time=1.0, rounds=5):
    """Seconds per call when every result is waited for before the next call (a user's loop that
    reads each answer): no overlap of dispatch with the previous call's work."""
    jax.block_until_ready(fn(*args))
    best = float("inf")
    for _ in range(rounds):
        n, start = 0, time.perf_counter()
        while True:
            jax.block_until_ready(fn(*args))
            n += 1
            if time.perf_counter() - start > min_time / rounds and n >= 3:
                break
        best = min(best, (time.perf_counter() - start) / n)
    return best


def _shard(x):
    """Split the leading (batch) axis over every local device when it divides evenly."""
    devices = jax.local_devices()
    if len(devices) == 1 or x.shape[0] % len(devices):
        return x
    return jax.device_put(x, NamedSharding(Mesh(devices, ("batch",)), PartitionSpec("batch")))


def ours(model, batches, dtypes, ops):
    rows = []
    for dtype in dtypes:
        m = model.astype(dtype)
        for name, op in ops.items():
            for B in batches:
                keys = jax.random.split(jax.random.PRNGKey(0), B)
                qs = jax.vmap(configuration.random_configuration, in_axes=(None, 0))(m, keys)
                vs = _shard(jnp.ones((B, m.nv), dtype))
                qs = _shard(qs)
                f = jax.jit(jax.vmap(op, in_axes=(None, 0, 0)))
                t0 = time.perf_counter()
                compiled = f.lower(m, qs, vs).compile()
                compile_s = time.perf_counter() - t0
                dt = timed(compiled, m, qs, vs)
                dt_wait = timed_waiting(compiled, m, qs, vs)
                rows.append((name, np.dtype(dtype).name, B, compile_s, B / dt, B / dt_wait))
                print(f"  ours {name:11s} {np.dtype(dtype).name:8s} batch {B:6d}: "
                      f"compile {compile_s:6.2f} s   pipelined {B / dt:11.4g} /s   "
                      f"waiting {B / dt_wait:11.4g} /s", flush=True)
    return rows


def pinocchio(path, batches):
    try:
        import pinocchio as pin
    except ImportError:
        print("  pinocchio not installed: skipped")
        return {}
    pm = pin.buildModelFromUrdf(str(path))
    pd = pm.createData()
    rng = np.random.default_rng(0)
    out = {}
    B = max(batches)
    q = np.stack([pin.randomConfiguration(pm) for _ in range(B)], axis=1)
    v = rng.normal(size=(pm.nv, B))
    start = time.perf_counter()
    for k in range(min(B, 2000)):
        pin.rnea(pm, pd, q[:, k], v[:, k], v[:, k])
    out["rnea loop"] = min(B, 2000) / (time.perf_counter() - start)
    start = time.perf_counter()
    for k in range(min(B, 2000)):
        pin.forwardKinematics(pm, pd, q[:, k])
        pin.updateFramePlacements(pm, pd)
    out["fk loop"] = min(B, 2000) / (time.perf_counter() - start)
    start = time.perf_counter()
    for k in range(min(B, 2000)):
        pin.aba(pm, pd, q[:, k], v[:, k], v[:, k])
    out["aba loop"] = min(B, 2000) / (time.perf_counter() - start)
    frame = pm.nframes - 1
    start = time.perf_counter()
    for k in range(min(B, 2000)):
        pin.computeFrameJacobian(pm, pd, q[:, k], frame, pin.LOCAL_WORLD_ALIGNED)
    out["jacobian loop"] = min(B, 2000) / (time.perf_counter() - start)
    start = time.perf_counter()
    for k in range(min(B, 2000)):
        pin.crba(pm, pd, q[:, k])
    out["crba loop"] = min(B, 2000) / (time.perf_counter() - start)
    threads = os.cpu_count() or 1
    out[f"fk loop in {threads} processes at once"] = _fk_loop_in_processes(str(path), threads)
    pool = pin.ModelPool(pm, threads)
    res = np.zeros((pm.nv, B))
    for label, fn in (("rneaInParallel", pin.rneaInParallel), ("abaInParallel", pin.abaInParallel)):
        fn(threads, pool, q, v, v, res)
        best = 0.0
        for _ in range(5):                                   # best of 5 rounds, as for ours
            n, start = 0, time.perf_counter()
            while time.perf_counter() - start < 0.2 or n < 3:
                fn(threads, pool, q, v, v, res)
                n += 1
            best = max(best, B * n / (time.perf_counter() - start))
        out[f"{label} ({threads} threads, batch {B})"] = best
    for k, val in out.items():
        print(f"  pinocchio {k:40s} {val:12.4g} /s", flush=True)
    return out


def _fk_loop(path, barrier, results, seconds=1.0):
    """One worker of the parallel FK loop: build, wait for the others, then loop for
    ``seconds`` and report configurations per second."""
    import pinocchio as pin
    pm = pin.buildModelFromUrdf(path)
    pd = pm.createData()
    qs = [pin.randomConfiguration(pm) for _ in range(1000)]
    barrier.wait()
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for q in qs:
            pin.forwardKinematics(pm, pd, q)
            pin.updateFramePlacements(pm, pd)
        n += len(qs)
    results.put(n / (time.perf_counter() - start))


def _fk_loop_in_processes(path, processes):
    """Pinocchio has no threaded FK in Python: its per-call FK loop run by ``processes`` worker
    processes at the same time (released together by a barrier), rates summed."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(processes), ctx.Queue()
    workers = [ctx.Process(target=_fk_loop, args=(path, barrier, results)) for _ in range(processes)]
    for w in workers:
        w.start()
    rates = [results.get(timeout=300) for _ in workers]
    for w in workers:
        w.join()
    return sum(rates)


def mjx_figures(model, batch):
    try:
        import mujoco
        from mujoco import mjx

        from mjx_backend.layout import compile_scene
    except ImportError:
        print("  mujoco-mjx not installed: skipped")
        return {}
    mj = compile_scene(model).mj          # our generated MJCF (a URDF's package:// meshes need no lookup)
    mj.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    mx = mjx.put_model(mj)
    d0 = mjx.make_data(mx)
    qs = jnp.asarray(np.random.default_rng(0).uniform(-1, 1, (batch, mj.nq)), dtype=d0.qpos.dtype)
    out = {}
    for name, fn in (("kinematics", mjx.kinematics), ("forward", mjx.forward)):
        f = jax.jit(jax.vmap(lambda q, fn=fn: fn(mx, d0.replace(qpos=q)).xpos))
        t0 = time.perf_counter()
        compiled = f.lower(qs).compile()
        compile_s = time.perf_counter() - t0
        dt = timed(compiled, qs, min_time=0.2)
        out[name] = (compile_s, batch / dt)
        print(f"  mjx {name:10s} batch {batch}: compile {compile_s:6.2f} s   {batch / dt:12.4g} /s",
              flush=True)
    return out


# ---- batch-1 latency ------------------------------------------------------------------------------

LATENCY_OPS = ("fk", "jacobian", "rnea", "aba")


def _call_times(fn, n):
    """Seconds of each of ``n`` single calls of ``fn()``."""
    out = np.empty(n)
    clock = time.perf_counter
    for i in range(n):
        t0 = clock()
        fn()
        out[i] = clock() - t0
    return out


def _interleaved(contenders, n=2000, rounds=5):
    """{name: (median us, p90 us)}: rounds of ``n`` timed calls, contenders taking turns within
    each round (a load spike then hits them alike); 200 untimed calls each first."""
    samples = {k: [] for k in contenders}
    for fn in contenders.values():
        _call_times(fn, 200)
    for _ in range(rounds):
        for k, fn in contenders.items():
            samples[k].append(_call_times(fn, n))
    return {k: (1e6 * np.median(np.concatenate(v)), 1e6 * np.percentile(np.concatenate(v), 90))
            for k, v in samples.items()}


def latency(model, path, dtypes, n=2000, rounds=5):
    """Batch-1 latency per call (us): ours (single_call, NumPy in/out and raw device arrays),
    the plain jitted call with the Model as an argument, Pinocchio's per-call loop."""
    from caliper_jax.single import single_call

    try:
        import pinocchio as pin
    except ImportError:
        pin = None
    rows, pin_calls = [], {}
    rng = np.random.default_rng(0)
    v64, a64 = rng.normal(size=model.nv), rng.normal(size=model.nv)
    if pin is not None:
        pm = pin.buildModelFromUrdf(str(path))
        pd = pm.createData()
        q64 = pin.randomConfiguration(pm)
        pin_calls = {
            "fk": lambda: (pin.forwardKinematics(pm, pd, q64), pin.updateFramePlacements(pm, pd)),
            "jacobian": lambda: pin.computeFrameJacobian(pm, pd, q64, pm.nframes - 1,
                                                         pin.LOCAL_WORLD_ALIGNED),
            "rnea": lambda: pin.rnea(pm, pd, q64, v64, a64),
            "aba": lambda: pin.aba(pm, pd, q64, v64, a64),
        }
    else:
        q64 = np.asarray(configuration.random_configuration(model, jax.random.PRNGKey(0)), np.float64)
    for dtype in dtypes:
        np_dtype = np.dtype(dtype)
        m = model.astype(dtype)
        q, v, a = (x.astype(np_dtype) for x in (q64, v64, a64))
        frame = m.nframe - 1
        for op in LATENCY_OPS:
            kw = {"frame": frame} if op == "jacobian" else {}
            s = single_call(m, op, **kw)
            args = (q,) if op in ("fk", "jacobian") else (q, v, a)
            dev_args = [jax.device_put(x) for x in args]
            plain = jax.jit({"fk": kinematics.forward_kinematics,
                             "jacobian": partial(kinematics.frame_jacobian, frame=frame),
                             "rnea": dynamics.rnea, "aba": dynamics.aba}[op])
            plain_args = (m, *[jnp.asarray(x) for x in args])
            contenders = {
                "ours": lambda s=s, args=args: s(*args),
                "raw": lambda c=s.compiled, d=dev_args: c(*d).block_until_ready(),
                "jit(model, ...)": lambda f=plain, x=plain_args: np.asarray(f(*x)),
            }
            if pin_calls:
                contenders["pinocchio"] = pin_calls[op]
            res = _interleaved(contenders, n=n, rounds=rounds)
            ratio = res["ours"][0] / res["pinocchio"][0] if pin_calls else float("nan")
            rows.append((op, np_dtype.name, s.compile_s, res, ratio))
            print(f"  {op:9s} {np_dtype.name:8s} compile {s.compile_s:5.2f} s  " + "  ".join(
                f"{k} {med:7.2f} (p90 {p90:7.2f})" for k, (med, p90) in res.items())
                + f"  ours/pinocchio {ratio:5.1f}x", flush=True)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robot", default="panda")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 64, 1024, 4096])
    parser.add_argument("--dtypes", nargs="+", default=["float32", "float64"])
    parser.add_argument("--ops", nargs="+", default=list(OPS))
    parser.add_argument("--no-mjx", action="store_true")
    parser.add_argument("--mjx-batch", type=int, default=64)
    parser.add_argument("--host-devices", type=int, default=1,
                        help="XLA CPU devices to shard the batch over (read before JAX starts)")
    parser.add_argument("--part", choices=("all", "throughput", "latency"), default="all",
                        help="throughput (batches), batch-1 latency, or both (default)")
    parser.add_argument("--latency-calls", type=int, default=2000,
                        help="timed calls per contender per round (5 rounds)")
    parser.add_argument("--sync-dispatch", action="store_true",
                        help="jax_cpu_enable_async_dispatch off (read before JAX starts)")
    args = parser.parse_args()
    import robots

    path = robots.resolve(args.robot)
    model = load(args.robot, mimic=False)  # Pinocchio's default: mimic joints independent
    print(f"{args.robot}: nq={model.nq}, {model.nbody} bodies, {model.nframe} frames; jax {jax.__version__} "
          f"on {jax.default_backend()} ({os.cpu_count()} cores, {len(jax.local_devices())} XLA devices)")
    if args.part in ("all", "throughput"):
        print("caliper_jax (vmap + jit):")
        ours(model, args.batches, [getattr(jnp, d) for d in args.dtypes], {k: OPS[k] for k in args.ops})
        print("Pinocchio (float64):")
        pinocchio(path, args.batches)
        if not args.no_mjx:
            print("MJX (contacts disabled; the MJCF generated from the same model):")
            mjx_figures(model, args.mjx_batch)
    if args.part in ("all", "latency"):
        print(f"Batch-1 latency per call, us, median (p90); Pinocchio float64; async dispatch "
              f"{'off' if args.sync_dispatch else 'on'}:")
        latency(model, path, [getattr(jnp, d) for d in args.dtypes], n=args.latency_calls)


if __name__ == "__main__":
    main()
