"""PPO on a zoo task: ours (learn.rl, CPU engine) vs Stable-Baselines3 PPO (torch, CPU) through our
gymnasium adapter (tasks.sb3_vec), side by side in one run.

Same task, same worlds, same env steps, same network sizes (actor and critic hidden layers), same
rollout length, epochs and minibatch count. Printed per library: wall time of the run (ours: the
first update, which includes compiles, reported apart), collection env steps/s (ours: the
collectors' own timing; SB3: env steps over the time spent inside ``collect_rollouts``), and the
test-seed success of the final deterministic policy (learn.evaluate for ours; SB3's predict in
the same VecEnv for SB3, same episodes count and seed). SB3 needs torch (the ``rl`` extra).

    python benchmarks/bench_rl.py --steps 400000 --envs 64
"""
from __future__ import annotations

import argparse
import time

import numpy as np


def ours(task, steps, envs, rollout, hidden, episodes, seed):
    from learn.evaluate import evaluate
    from learn.rl import PPOConfig, train_rl

    cfg = PPOConfig(envs=envs, rollout=rollout, steps=steps, actor_hidden=hidden, critic_hidden=hidden,
                    seed=seed)
    t = time.perf_counter()
    res = train_rl(task, "ppo", cfg)
    wall = time.perf_counter() - t
    collect = sum(r["collect_s"] for r in res.history[1:])
    sps = cfg.batch * (len(res.history) - 1) / max(collect, 1e-9)
    ev = evaluate(res.policy, task, episodes=episodes, seed=1_000_003)
    return {"wall_s": wall, "compile_s": res.compile_s, "collect_steps_per_s": sps,
            "success": ev.success_rate, "env_steps": res.env_steps}


def sb3(task, steps, envs, rollout, hidden, episodes, seed):
    from stable_baselines3 import PPO

    from tasks.sb3_vec import sb3_vec_env

    venv = sb3_vec_env(task, envs, seed=seed)
    model = PPO("MlpPolicy", venv, n_steps=rollout, batch_size=envs * rollout // 4, n_epochs=4, seed=seed,
                device="cpu", policy_kwargs={"net_arch": {"pi": list(hidden), "vf": list(hidden)}})
    spent = [0.0]
    inner = model.collect_rollouts

    def timed(*a, **k):
        t0 = time.perf_counter()
        out = inner(*a, **k)
        spent[0] += time.perf_counter() - t0
        return out

    model.collect_rollouts = timed
    t = time.perf_counter()
    model.learn(total_timesteps=steps)
    wall = time.perf_counter() - t
    # test seed: the same count of episodes, deterministic actions, success from final_info
    venv.seed(1_000_003)
    obs = venv.reset()
    wins, done_n = 0, 0
    while done_n < episodes:
        action, _ = model.predict(obs, deterministic=True)
        obs, _, done, infos = venv.step(action)
        for i in np.flatnonzero(done):
            wins += int(infos[i].get("is_success", False))
            done_n += 1
    venv.close()
    sps = model.num_timesteps / max(spent[0], 1e-9)
    return {"wall_s": wall, "compile_s": 0.0, "collect_steps_per_s": sps, "success": wins / done_n,
            "env_steps": int(model.num_timesteps)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="lift-cube")
    ap.add_argument("--steps", type=int, default=400_000)
    ap.add_argument("--envs", type=int, default=64)
    ap.add_argument("--rollout", type=int, default=32)
    ap.add_argument("--hidden", type=int, nargs="+", default=[64, 64])
    ap.add_argument("--episodes", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    args = (a.task, a.steps, a.envs, a.rollout, tuple(a.hidden), a.episodes, a.seed)
    rows = {"caliper PPO": ours(*args), "SB3 PPO": sb3(*args)}
    print(f"{a.task}: {a.steps} env steps, {a.envs} worlds, rollout {a.rollout}, hidden {a.hidden}")
    print(f"{'':14s} {'wall s':>8s} {'compile s':>9s} {'collect steps/s':>16s} {'test success':>13s}")
    for name, r in rows.items():
        print(f"{name:14s} {r['wall_s']:8.1f} {r['compile_s']:9.1f} {r['collect_steps_per_s']:16.0f} "
              f"{r['success']:13.0%}")
    o, s = rows["caliper PPO"], rows["SB3 PPO"]
    print(f"ratios: wall {s['wall_s'] / o['wall_s']:.2f}x, collection steps/s "
          f"{o['collect_steps_per_s'] / s['collect_steps_per_s']:.2f}x (SB3 / ours, ours / SB3)")


if __name__ == "__main__":
    main()
