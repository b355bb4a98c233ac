"""The protocol table of a sweep: per policy x task x randomisation level, the success of each
training run, their mean and spread, and a Wilson interval on the distinct episodes.

A *policy* here is a group of trained runs of one recipe that differ only in their training seed
(``{"act": ["act[0]", "act[1]", "act[2]"]}``: sweep keys of a :class:`learn.evaluate.SweepResult`).
Each row says how well the recipe does, not one lucky run:

* ``per_run``: each training run's successes over all evaluation seeds of the cell;
* ``mean`` / ``std`` (sample standard deviation, 0 for one run) / ``min`` / ``max`` of the runs'
  success rates -- the spread over training seeds;
* ``wilson95``: the Wilson 95% interval of all the runs' episodes together, each run counted on its
  distinct episodes (:mod:`learn.protocol`: with randomisation off a run's W worlds are one
  episode); ``n_effective`` is that count.
"""
from __future__ import annotations

import math

from caliper_jax.errors import CaliperError
from learn.verdicts import wilson_interval


def protocol_table(sweep_result, groups: dict) -> dict:
    """The table (JSON-ready) of ``sweep_result`` (:class:`learn.evaluate.SweepResult`) with
    ``groups`` {policy name: [sweep keys of its training runs]} -> {"rows": [...], "groups":
    groups}; rows ordered by task, level, then mean success desc and name."""
    from learn.evaluate import pooled

    by: dict = {}
    for r in sweep_result.runs:
        by.setdefault((r.policy, r.task, r.level), []).append(r)
    keys = {k for ks in groups.values() for k in ks}
    unknown = sorted({r.policy for r in sweep_result.runs} - keys)
    if unknown:
        raise CaliperError(f"protocol table: sweep policies {unknown} belong to no group")
    cells = sorted({(r.task, r.level) for r in sweep_result.runs})
    rows = []
    for task, level in cells:
        for name, members in groups.items():
            per_run, k_eff, n_eff, seeds = [], 0.0, 0, set()
            for key in members:
                runs = by.get((key, task, level), [])
                if not runs:
                    continue
                p = pooled([r.result for r in runs])
                seeds.update(r.seed for r in runs)
                per_run.append({"run": key, "episodes": p["episodes"], "successes": p["successes"],
                                "success_rate": p["success_rate"], "n_effective": p["n_effective"]})
                k_eff += p["successes_effective"]
                n_eff += p["n_effective"]
            if not per_run:
                continue
            rates = [r["success_rate"] for r in per_run]
            mean = math.fsum(rates) / len(rates)
            var = math.fsum((x - mean) ** 2 for x in rates) / (len(rates) - 1) if len(rates) > 1 else 0.0
            std = math.sqrt(var)
            rows.append({"policy": name, "task": task, "level": level, "training_runs": len(per_run),
                         "eval_seeds": sorted(seeds), "per_run": per_run, "mean": mean, "std": std,
                         "min": min(rates), "max": max(rates),
                         "episodes": sum(r["episodes"] for r in per_run),
                         "successes": sum(r["successes"] for r in per_run), "n_effective": n_eff,
                         "successes_effective": k_eff, "wilson95": list(wilson_interval(k_eff, n_eff))})
    rows.sort(key=lambda d: (d["task"], d["level"], -d["mean"], d["policy"]))
    return {"rows": rows, "groups": {k: list(v) for k, v in groups.items()}}


def table_text(table: dict) -> list[str]:
    """One line per row: policy, task, level, mean +- std [min, max] over runs, Wilson, N_eff."""
    lines = ["policy                 task            level    runs  success mean +- std  [min, max]"
             "    wilson95 (N_eff)"]
    for r in table["rows"]:
        lo, hi = r["wilson95"]
        lines.append(f"{r['policy']:<22} {r['task']:<15} {r['level']:<8} {r['training_runs']:>4}  "
                     f"{r['mean']:>6.0%} +- {r['std']:<5.0%}      [{r['min']:.0%}, {r['max']:.0%}]"
                     f"  [{lo:.2f}, {hi:.2f}] ({r['n_effective']})")
    return lines


def plot_table(path, table: dict):
    """Bars of the mean success per policy, grouped by task / level, error bars the spread over
    training runs and whiskers the Wilson interval; None, or a note when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return 'matplotlib is not installed (pip install "caliper-jax[plot]"); no plot written'
    rows = table["rows"]
    cells = sorted({(r["task"], r["level"]) for r in rows})
    names = sorted({r["policy"] for r in rows})
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(cells) * max(len(names), 1) ** 0.5), 4))
    width = 0.8 / max(len(names), 1)
    for i, name in enumerate(names):
        xs, means, stds, lo, hi = [], [], [], [], []
        for j, cell in enumerate(cells):
            row = next((r for r in rows if r["policy"] == name and (r["task"], r["level"]) == cell), None)
            if row is None:
                continue
            xs.append(j + i * width)
            means.append(row["mean"])
            stds.append(row["std"])
            lo.append(row["mean"] - row["wilson95"][0])
            hi.append(row["wilson95"][1] - row["mean"])
        ax.bar(xs, means, width, yerr=stds, capsize=3, label=name)
        ax.errorbar(xs, means, yerr=[[max(x, 0.0) for x in lo], [max(x, 0.0) for x in hi]], fmt="none",
                    ecolor="black", alpha=0.4, elinewidth=3)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(cells))], [f"{t}\n{lv}" for t, lv in cells])
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("success rate (mean over training runs)")
    ax.set_title("bars: mean; thin: spread over training seeds; thick: Wilson 95%", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return None


__all__ = ["plot_table", "protocol_table", "table_text"]
