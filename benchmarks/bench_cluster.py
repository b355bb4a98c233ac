"""A sweep on a local Ray head with 1 vs 2 workers against the one-process sweep.

Starts a Ray head on 127.0.0.1 (``--cpus``, default 2; shut down at the end) and runs the same
sweep (hold-still and drooping baselines x 2 randomisation levels x ``--seeds`` seeds on lift-cube
with a ``--horizon``-second horizon, ``--episodes`` each) three ways: in this process
(:func:`learn.evaluate.sweep`), on Ray with one cell at a time (each cell reserves every CPU: one
worker) and on Ray with one cell per CPU (two workers). The first Ray run of each kind is cold
(worker start-up, imports and the env compile in each worker) and reported apart; then ``--rounds``
warm runs of the three alternate, and the best of each is kept. Printed: wall time, cells/s, the
speed-up of 2 workers over 1, and the overhead per cell of Ray (1 worker) over this process.
Every Ray result is checked byte-identical to the one-process sweep.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import time


def hold(obs):
    return obs[:, :3]


def droop(obs):
    return obs[:, :3] - 0.05


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpus", type=int, default=2)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--episodes", type=int, default=4)
    ap.add_argument("--horizon", type=float, default=1.0, help="episode length in seconds")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()

    import sys

    import ray

    from learn.cluster import ray_sweep
    from learn.evaluate import sweep
    from tasks.schema import find_task, load_task

    task = dataclasses.replace(load_task(find_task("lift-cube")), horizon_s=args.horizon)
    kw = {"randomization_levels": {"none": None, "default": "default"}, "seeds": list(range(args.seeds)),
          "episodes": args.episodes, "num_envs": args.episodes}
    pol = {"hold": hold, "droop": droop}
    cells = len(pol) * 2 * args.seeds

    def timed(fn):
        t0 = time.perf_counter()
        res = fn()
        return time.perf_counter() - t0, json.dumps(res.to_dict(), sort_keys=True)

    runs = {"one process": lambda: sweep(pol, task, **kw),
            "ray, 1 worker": lambda: ray_sweep(pol, task, num_cpus=args.cpus, **kw),
            "ray, 2 workers": lambda: ray_sweep(pol, task, num_cpus=1, **kw)}
    ray.init(num_cpus=args.cpus, _node_ip_address="127.0.0.1", include_dashboard=False, log_to_driver=False,
             logging_level="ERROR")
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        cold, best, ref = {}, {}, None
        for name, fn in runs.items():
            cold[name], out = timed(fn)
            ref = ref or out
            assert out == ref, f"{name}: result differs from the one-process sweep"
        for _ in range(args.rounds):
            for name, fn in runs.items():
                t, out = timed(fn)
                assert out == ref, f"{name}: result differs from the one-process sweep"
                best[name] = min(best.get(name, t), t)
    finally:
        ray.shutdown()
    print(f"sweep: {cells} cells x {args.episodes} episodes of {args.horizon:g} s, Ray head with {args.cpus} "
          f"CPUs; every result byte-identical to the one-process sweep")
    print(f"{'run':<16} {'cold s':>8} {'warm s':>8} {'cells/s':>8}")
    for name in runs:
        print(f"{name:<16} {cold[name]:8.2f} {best[name]:8.2f} {cells / best[name]:8.2f}")
    one, two, local = best["ray, 1 worker"], best["ray, 2 workers"], best["one process"]
    print(f"2 workers vs 1: {one / two:.2f}x; Ray overhead per cell (1 worker vs one process): "
          f"{(one - local) / cells * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
