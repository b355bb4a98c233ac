"""The ResNet-18 image trunk alone, forward + backward, ours (JAX) vs torchvision's, side by side.

    python benchmarks/lerobot/trunk_speed.py [--rounds 3] [--steps 3] [--batch 64] [--size 96]
        [--ours group,affine,frozen] [--torch group,frozen] [--lerobot-python PATH] [--json]

The driver (our venv) runs every variant as its own process, one after the other, in alternating
rounds (the order reversed each round, so each pair sees similar load), and prints the median
seconds per step of each, its runs, and each variant's ratio to torchvision's:

* ours: ``learn.policies.vision.ResNet18`` at ResNet-18's width (64) with ``vision_norm`` "group"
  (GroupNorm, C / 16 groups), "affine" (a learned per-channel scale and bias) or "frozen" (the same
  held fixed: no gradients); one jitted ``jax.value_and_grad`` of the mean squared trunk output with
  respect to the weights, images channels last (N, H, W, 3); compile time reported apart;
* torch (lerobot's venv, nothing of ours imported): torchvision's ``resnet18`` up to ``layer4``
  (the trunk lerobot's ACT and diffusion policy use), with ``GroupNorm(C // 16, C)`` in place of its
  BatchNorm (lerobot's diffusion, ``use_group_norm``) or ``FrozenBatchNorm2d`` (lerobot's ACT);
  eager, ``torch.set_num_threads`` = our thread count, ``OMP_WAIT_POLICY=PASSIVE`` unless set
  (spinning OpenMP threads collapse on a loaded machine); the same mean squared output, backward.

Both sides: ``--batch`` random images of ``--size`` x ``--size``, the same every step, weights
only differentiated (not the input), ``--steps`` timed steps after one untimed (compile / warm-up).
A worker prints one JSON line; ``--side ours|torch --norm NAME`` runs one worker.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LEROBOT_PY = ROOT / ".venv-lerobot" / "bin" / "python"
OURS, TORCH = ("group", "affine", "frozen"), ("group", "frozen")


def _threads() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def run_ours(norm: str, batch: int, size: int, steps: int) -> dict:
    """One worker of ours: (s/step, compile s, trained parameters)."""
    sys.path.insert(0, str(ROOT))
    import jax
    import jax.numpy as jnp
    import numpy as np
    from flax import nnx

    from learn.policies.vision import ResNet18

    model = ResNet18(64, rngs=nnx.Rngs(0), norm=norm)
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    x = jnp.asarray(np.random.default_rng(0).random((batch, size, size, 3), np.float32))

    def loss(p, x):
        return jnp.mean(jnp.square(nnx.merge(graphdef, p, rest)(x)))

    step = jax.jit(jax.value_and_grad(loss))
    t0 = time.perf_counter()
    jax.block_until_ready(step(params, x))
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(steps):
        out = step(params, x)
    jax.block_until_ready(out)
    return {"s_per_step": (time.perf_counter() - t0) / steps, "first_s": compile_s,
            "params": int(sum(v.size for v in jax.tree_util.tree_leaves(params))), "jax": jax.__version__}


def run_torch(norm: str, batch: int, size: int, steps: int, threads: int) -> dict:
    """One worker of torchvision's trunk: (s/step, first-step s, trained parameters)."""
    import torch
    import torchvision
    from torchvision.ops.misc import FrozenBatchNorm2d

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    layer = FrozenBatchNorm2d if norm == "frozen" else (lambda c: torch.nn.GroupNorm(c // 16, c))
    net = torchvision.models.resnet18(weights=None, norm_layer=layer)
    trunk = torch.nn.Sequential(*list(net.children())[:-2])           # up to layer4, as lerobot
    x = torch.rand(batch, 3, size, size, generator=torch.Generator().manual_seed(0))

    def step():
        trunk.zero_grad(set_to_none=True)
        loss = trunk(x).square().mean()
        loss.backward()
        return loss.item()

    t0 = time.perf_counter()
    step()
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return {"s_per_step": (time.perf_counter() - t0) / steps, "first_s": first,
            "params": sum(p.numel() for p in trunk.parameters() if p.requires_grad),
            "torch": torch.__version__}


def _worker(side: str, norm: str, a) -> dict:
    py = sys.executable if side == "ours" else str(a.lerobot_python)
    cmd = [py, "-W", "ignore", str(Path(__file__).resolve()), "--side", side, "--norm", norm,
           "--batch", str(a.batch), "--size", str(a.size), "--steps", str(a.steps),
           "--threads", str(a.threads)]
    env = {**os.environ, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}
    try:
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"over {a.timeout:g} s"}
    if run.returncode != 0:
        return {"error": (run.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(run.stdout.strip().splitlines()[-1])


def drive(a) -> dict:
    variants = [("ours", n) for n in a.ours] + [("torch", n) for n in a.torch]
    if not Path(a.lerobot_python).exists():
        variants = [v for v in variants if v[0] == "ours"]
    runs = {f"{s}:{n}": [] for s, n in variants}
    for r in range(a.rounds):
        order = variants if r % 2 == 0 else variants[::-1]
        for side, norm in order:
            got = _worker(side, norm, a)
            runs[f"{side}:{norm}"].append(got)
            said = f"{got['s_per_step']:.2f} s/step" if "s_per_step" in got else got["error"]
            print(f"round {r + 1}: {side} {norm}: {said}", file=sys.stderr, flush=True)
    out = {"batch": a.batch, "size": a.size, "steps": a.steps, "threads": a.threads, "rounds": a.rounds,
           "load_avg": os.getloadavg(), "variants": {}}
    for name, rs in runs.items():
        ok = [x for x in rs if "s_per_step" in x]
        times = [x["s_per_step"] for x in ok]
        out["variants"][name] = {"median_s": statistics.median(times) if ok else None, "runs_s": times,
                                 "first_s": [x["first_s"] for x in ok],
                                 "params": ok[0]["params"] if ok else None,
                                 "errors": [x["error"] for x in rs if "error" in x]}
    return out


def render(res: dict) -> str:
    v = res["variants"]
    lines = [f"ResNet-18 trunk fwd+bwd, {res['batch']} x {res['size']}x{res['size']}, {res['threads']} "
             f"threads, {res['rounds']} alternating rounds of {res['steps']} steps (load avg at the end "
             f"{res['load_avg'][0]:.1f}):",
             f"  {'variant':<14} {'median s/step':>13} {'vs torch group':>15} {'vs torch frozen':>16}  "
             "params  runs"]
    for name, d in v.items():
        med = d["median_s"]
        ratio = []
        for ref in ("torch:group", "torch:frozen"):
            r = v.get(ref, {}).get("median_s")
            ratio.append(f"{med / r:.2f}x" if med and r else "-")
        runs = ", ".join(f"{x:.2f}" for x in d["runs_s"])
        runs += f" ({'; '.join(d['errors'])})" if d["errors"] else ""
        shown = "-" if med is None else f"{med:.3f}"
        lines.append(f"  {name:<14} {shown:>13} {ratio[0]:>15} {ratio[1]:>16}  {d['params']}  [{runs}]")
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--side", choices=("ours", "torch"), default=None, help="run one worker")
    ap.add_argument("--norm", default="group")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--size", type=int, default=96)
    ap.add_argument("--threads", type=int, default=_threads())
    ap.add_argument("--ours", type=lambda s: s.split(","), default=list(OURS))
    ap.add_argument("--torch", type=lambda s: s.split(","), default=list(TORCH))
    ap.add_argument("--lerobot-python", default=str(LEROBOT_PY))
    ap.add_argument("--timeout", type=float, default=1200)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    if a.side == "ours":
        print(json.dumps(run_ours(a.norm, a.batch, a.size, a.steps)))
    elif a.side == "torch":
        print(json.dumps(run_torch(a.norm, a.batch, a.size, a.steps, a.threads)))
    else:
        res = drive(a)
        print(json.dumps(res) if a.json else render(res))


if __name__ == "__main__":
    main()
