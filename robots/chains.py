"""Synthetic test robots: URDF text for N-link serial chains and branched trees, for the deep-tree
tests and benchmarks (``tests/test_deep_chain.py``, ``benchmarks/bench_deep_chain.py``). Plain
strings, no NumPy, no JAX; deterministic (the same arguments give the same bytes).

    from caliper_jax.io.urdf import read_urdf_string
    desc = read_urdf_string(chain_urdf(1000))
"""
from __future__ import annotations

_AXES = ("0 0 1", "0 1 0", "1 0 0", "0 0.6 0.8")


def tree_parents(n: int, branch_every: int = 0) -> list[int]:
    """Parent link index of links 1..n (link 0 is the fixed base): a serial chain, or with
    ``branch_every = k > 0`` a tree whose link i (i a multiple of k) starts a side branch on
    link i - k // 2 instead of continuing from link i - 1."""
    parents = []
    for i in range(1, n + 1):
        if branch_every > 0 and i % branch_every == 0 and i > branch_every:
            parents.append(i - branch_every // 2)
        else:
            parents.append(i - 1)
    return parents


def chain_urdf(n: int, *, branch_every: int = 0, prismatic_every: int = 0, tool: bool = True,
               name: str | None = None) -> str:
    """URDF text of a robot with ``n`` moving joints: a ``base`` link (its inertial counts when the
    robot is loaded with ``floating=True``) and links ``link1``
    .. ``link{n}``, joint ``j{i}`` carrying ``link{i}``. Axes cycle through z, y, x and a tilted
    one, link offsets and inertials vary per link (no symmetry hides a wrong index); every
    ``prismatic_every``-th joint (if > 0) is prismatic, the others revolute with limits +-3 rad;
    ``branch_every`` makes a tree (see :func:`tree_parents`); ``tool`` adds a fixed ``tool``
    frame on the last link."""
    if n < 1:
        raise ValueError(f"chain_urdf: n must be >= 1, got {n}")
    name = name or (f"chain{n}" if branch_every <= 0 else f"tree{n}")
    out = [f'<robot name="{name}">',  # the base's inertial only counts on a floating base
           '  <link name="base"><inertial><mass value="2"/><inertia ixx="0.01" ixy="0" ixz="0" '
           'iyy="0.012" iyz="0" izz="0.014"/></inertial></link>']
    for i, parent in enumerate(tree_parents(n, branch_every), start=1):
        length = 0.05 + 0.01 * (i % 5)
        mass = 0.5 + 0.1 * (i % 7)
        ixx, iyy, izz = 1e-3 * (1 + i % 3), 1.2e-3 * (1 + i % 4), 0.8e-3 * (1 + i % 2)
        out.append(
            f'  <link name="link{i}"><inertial><origin xyz="{0.01 * (i % 3):g} 0 {length / 2:g}" '
            f'rpy="0 0 {0.1 * (i % 4):g}"/><mass value="{mass:g}"/>'
            f'<inertia ixx="{ixx:g}" ixy="{1e-5 * (i % 3):g}" ixz="0" iyy="{iyy:g}" iyz="0" '
            f'izz="{izz:g}"/></inertial></link>')
        parent_link = "base" if parent == 0 else f"link{parent}"
        prismatic = prismatic_every > 0 and i % prismatic_every == 0
        kind, limit = ("prismatic", "-0.2") if prismatic else ("revolute", "-3")
        upper = limit.lstrip("-")
        off = f"{0.02 * ((i % 3) - 1):g} {0.01 * (i % 2):g} {length:g}" if i > 1 else "0 0 0.1"
        out.append(
            f'  <joint name="j{i}" type="{kind}"><parent link="{parent_link}"/>'
            f'<child link="link{i}"/><origin xyz="{off}" rpy="{0.05 * (i % 3):g} 0 0"/>'
            f'<axis xyz="{_AXES[i % len(_AXES)]}"/>'
            f'<limit lower="{limit}" upper="{upper}" effort="100" velocity="5"/>'
            f'<dynamics damping="0.01"/></joint>')
    if tool:
        out += ['  <link name="tool"/>',
                f'  <joint name="tool_joint" type="fixed"><parent link="link{n}"/><child link="tool"/>'
                '<origin xyz="0 0 0.05"/></joint>']
    out.append("</robot>")
    return "\n".join(out) + "\n"


__all__ = ["chain_urdf", "tree_parents"]
