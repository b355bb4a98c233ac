"""Batched IK on panda: caliper_jax (jit + vmap, restarts as a batch) beside a Pinocchio
damped-least-squares CLIK loop solving the same targets.

    python benchmarks/bench_ik.py [--sizes 1,100,1000,10000] [--dtypes float64,float32]

Targets: FK of configurations drawn uniformly within the joint limits (reachable by
construction), frame panda_hand_tcp, seed = mid-range of the limits. Success is recomputed
independently with Pinocchio's FK at 1e-6 m / 1e-5 rad (float64 runs; float32 runs are judged at
1e-4 m / 1e-4 rad, their precision). Timings are of ``caliper_jax.ik.ik`` (NumPy in, NumPy out,
so they include the host-side validation and transfers); compile time is the first call minus a
steady call; run time is the median of several steady calls.

The Pinocchio loop is the textbook CLIK: pin.computeFrameJacobian (LOCAL) + pin.log6, the same
gated damping, 0.3 rad step clamp, clamping to the limits, tol 1e-9, 100 iterations, and up to
8 attempts per target from the same seed and restart draws (stopping at the first success) -- one
target at a time from Python, as a user would write it.
"""
from __future__ import annotations

import argparse
import platform
import statistics
import time

import numpy as np

N_REPEAT = {1: 20, 100: 5, 1000: 3}


def make_targets(n, seed=0):
    import jax

    jax.config.update("jax_enable_x64", True)
    from caliper_jax import api
    from caliper_jax.loading import load

    model = load("panda")
    lo, hi = np.asarray(model.qpos_lower), np.asarray(model.qpos_upper)
    qs = np.random.default_rng(seed).uniform(lo, hi, (n, model.nq))
    T = api.fk(model, qs)[:, model.frame_id("panda_hand_tcp")]
    return model, qs, T


def run_jax(model64, T_all, sizes, dtype_name, compact):
    """caliper_jax.ik.ik on the first n targets: (n, compile s, run s, q, mean iterations)."""
    import jax.numpy as jnp

    from caliper_jax.ik import api as ik_api

    dtype = {"float64": jnp.float64, "float32": jnp.float32}[dtype_name]
    model = model64.astype(dtype)
    rows = []
    for n in sizes:
        T = T_all[:n].astype(np.float64)
        t0 = time.perf_counter()
        res = ik_api.ik(model, T, frame="panda_hand_tcp", key=0, compact=compact)      # compiles
        first = time.perf_counter() - t0
        times = []
        for _ in range(N_REPEAT.get(n, 1)):
            t0 = time.perf_counter()
            res = ik_api.ik(model, T, frame="panda_hand_tcp", key=0, compact=compact)
            times.append(time.perf_counter() - t0)
        run = statistics.median(times)
        q = np.asarray(res.q, np.float64)
        rows.append((n, max(first - run, 0.0), run, q, float(np.mean(res.iterations))))
    return rows


def pin_setup():
    import pinocchio as pin

    import robots

    pm = pin.buildModelFromUrdf(str(robots.resolve("panda")))
    return pin, pm, pm.createData(), pm.getFrameId("panda_hand_tcp")


def pin_errors(pin, pm, pd, fid, qs, T):
    """Position / rotation errors of our q (nq = 8, finger 2 mimics finger 1) through Pinocchio."""
    pos, rot = np.empty(len(qs)), np.empty(len(qs))
    for i, q in enumerate(qs):
        qp = np.r_[q, q[-1]]
        pin.framesForwardKinematics(pm, pd, qp)
        M = pd.oMf[fid]
        pos[i] = np.linalg.norm(M.translation - T[i, :3, 3])
        rot[i] = np.linalg.norm(pin.log3(M.rotation.T @ T[i, :3, :3]))
    return pos, rot


def run_pinocchio(pin, pm, pd, fid, T_all, n, starts):
    """Textbook DLS CLIK, one target at a time, attempts from ``starts`` (8, nq) in order."""
    lo, hi = pm.lowerPositionLimit, pm.upperPositionLimit
    out = np.empty((n, pm.nq))
    ok = np.zeros(n, bool)
    per_target = np.empty(n)
    for i in range(n):
        t0 = time.perf_counter()
        target = pin.SE3(T_all[i, :3, :3], T_all[i, :3, 3])
        best, best_err = None, np.inf
        for q in starts:
            q = np.clip(q.copy(), lo, hi)
            for _ in range(101):
                pin.framesForwardKinematics(pm, pd, q)
                err = pin.log6(pd.oMf[fid].actInv(target)).vector
                if np.linalg.norm(err[:3]) < 1e-9 and np.linalg.norm(err[3:]) < 1e-9:
                    break
                J = pin.computeFrameJacobian(pm, pd, q, fid, pin.LOCAL)
                JJt = J @ J.T
                w = np.sqrt(max(np.linalg.det(JJt), 0.0))
                lam2 = max(1e-3 * (1 - w / 1e-3) ** 2 if w < 1e-3 else 0.0, 1e-10)
                dq = J.T @ np.linalg.solve(JJt + lam2 * np.eye(6), err)
                dq *= min(1.0, 0.3 / max(np.abs(dq).max(), 1e-300))
                q = np.clip(pin.integrate(pm, q, dq), lo, hi)
            e = np.linalg.norm(err)
            if e < best_err:
                best, best_err = q, e
            if np.linalg.norm(err[:3]) < 1e-9 and np.linalg.norm(err[3:]) < 1e-9:
                ok[i] = True
                break
        out[i] = best
        per_target[i] = time.perf_counter() - t0
    return out, ok, per_target


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,100,1000,10000")
    parser.add_argument("--dtypes", default="float64,float32")
    parser.add_argument("--pinocchio", type=int, default=None,
                        help="targets for the Pinocchio loop (default: the largest size)")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    import jax

    model, qs, T = make_targets(max(sizes))
    print(f"caliper_jax IK benchmark -- panda, frame panda_hand_tcp, {max(sizes)} reachable targets")
    print(f"jax {jax.__version__} backend={jax.default_backend()} devices={jax.devices()} "
          f"python {platform.python_version()} {platform.machine()}")
    pin, pm, pd, fid = pin_setup()
    print(f"pinocchio {pin.__version__}\n")
    from caliper_jax.ik import api as ik_api

    for dtype_name in args.dtypes.split(","):
        tol_pos, tol_rot = (1e-6, 1e-5) if dtype_name == "float64" else (1e-4, 1e-4)
        for compact in (True, False):
            big = [n for n in sizes if n > ik_api.CHUNK]
            run_sizes = sizes if compact else big
            if not run_sizes:
                continue
            how = (f"compacting: {ik_api.CHUNK} lanes per call, unconverged targets regrouped every "
                   f"{ik_api.PASSES} iterations; batches <= {ik_api.CHUNK} are one call") if compact else \
                "one jitted vmapped call for the whole batch (the loop runs until its slowest target)"
            print(f"caliper_jax ik ({dtype_name}; 8 restarts solved together; {how})")
            print(f"  success at {tol_pos:g} m / {tol_rot:g} rad, recomputed with Pinocchio's FK; "
                  "compile = first call - steady call")
            head = ("batch", "compile s", "run ms", "us/target", "success %", "mean iters")
            print(f"  {head[0]:>6} " + " ".join(f"{h:>10}" for h in head[1:]))
            for n, compile_s, run_s, q, iters in run_jax(model, T, run_sizes, dtype_name, compact):
                pos, rot = pin_errors(pin, pm, pd, fid, q, T[:n])
                succ = 100.0 * np.mean((pos <= tol_pos) & (rot <= tol_rot))
                print(f"  {n:>6} {compile_s:>10.2f} {run_s * 1e3:>10.2f} {run_s / n * 1e6:>10.1f} "
                      f"{succ:>10.2f} {iters:>10.1f}")
            print()
    n_pin = args.pinocchio or max(sizes)
    from caliper_jax.ik import api as ik_api
    from caliper_jax.ik import numerical

    starts = np.asarray(numerical.restart_configurations(
        model, jax.random.PRNGKey(0), jax.numpy.asarray(ik_api.default_seed(model)),
        jax.numpy.ones(model.nq, bool), numerical.IKOptions()))
    starts = np.concatenate([starts, starts[:, -1:]], axis=1)               # finger 2 (mimic)
    t0 = time.perf_counter()
    q_pin, ok, per = run_pinocchio(pin, pm, pd, fid, T, n_pin, starts)
    total = time.perf_counter() - t0
    pos, rot = pin_errors(pin, pm, pd, fid, q_pin[:, :8], T[:n_pin])
    print("Pinocchio DLS CLIK loop (float64, Python loop over targets, computeFrameJacobian + log6)")
    print(f"  {'batch':>6} {'run ms':>10} {'us/target':>10} {'success %':>10}")
    for n in sizes:
        if n <= n_pin:
            succ = 100.0 * np.mean((pos[:n] <= 1e-6) & (rot[:n] <= 1e-5))
            print(f"  {n:>6} {per[:n].sum() * 1e3:>10.2f} {per[:n].mean() * 1e6:>10.1f} {succ:>10.2f}")
    print(f"  (total {total:.1f} s for {n_pin} targets)")


if __name__ == "__main__":
    main()
