"""Task check: what a JSON schema cannot see, answered by the real robot and a real MuJoCo scene.

The loader already rejects structurally bad files (unknown keys, a missing zone, bad numbers);
:func:`check_task` builds the scene and reports :class:`doctors.asset.report.Finding` values with
stable codes. Depths and distances are measured at the start pose ``q0`` with the props at their
start poses (MuJoCo collision detection), unless a rule says otherwise.

====  =======  ==========================================================================
code  level    rule
====  =======  ==========================================================================
K000  Error    the task does not build: robot, q0, gripper, prop names or the MuJoCo
               compile (the message is the build error; no other rule runs)
K001  Error    the success verdict is already true at t = 0 (success latches, so a policy
               doing nothing would score 100%)
K002  Error    a prop overlaps the robot's collision geometry by more than START_TOL
               (names the prop and the robot link)
K003  Error    a prop penetrates the ground by more than START_TOL (or lies under it)
K004  Error    two props, or a prop and a fixture, overlap by more than START_TOL
K005  Error    success is unreachable: no witness (no grasp of the scored prop, no carry
               pose in reach and joint limits) or the witness fails its settled simulation
K006  Warning  the jaw cannot grasp a prop's top face (out of reach, or only through
               something); a prop that is never scored is decoration, so not an error
K007  Warning  a prop starts in the air, touching nothing: it drops at t = 0
K008  Error    the verdict turns true with the robot holding q0 and nothing grasped
               (PASSIVE_S s, judged every 1/fps): a do-nothing policy would score
K009  Warning  the witness carry has no collision-free joint-space path (its settled
               simulation still passed): the props or the ground are in the way
K010  Error    the scene goes unstable when held at rest at q0
K011  Error    a baseline policy succeeds in more than MAX_RATE (1%) of its episodes:
               uniform random, sticky random or do-nothing, BASELINE_EPISODES episodes
               each under the default randomisation (:mod:`tasks.baselines`; the message
               states every count); a predicate a policy can meet without doing the task
====  =======  ==========================================================================

Every message names the task and the prop, zone or field at fault, and every finding has a fix
hint. K005 to K011 need the MuJoCo simulation; ``simulate=False`` skips K005, K008-K011, and
``baselines=0`` skips K011 alone (the costliest rule: 3 x BASELINE_EPISODES worlds for the horizon).
The start state is judged with nothing held or carried, K008 with the task's success dwell.

A friction-grasp task (a registry arm, ``"grasp": "friction"``) has no weld to carry a witness
with: its K005 witness is its scripted expert (:mod:`tasks.arm_expert`), EXPERT_EPISODES episodes
on the CPU engine without randomisation, all of which must succeed; K006 and K009 (the weld
witness's grasp and carry path) do not apply to it.
"""
from __future__ import annotations

import numpy as np

from caliper_jax.errors import CaliperError
from doctors.asset.report import SEVERITIES, Finding
from tasks.witness import half_height

PASSIVE_S = 2.0        # s the robot holds q0 for K008
START_TOL = 2e-3       # m: overlap tolerated at the start state (K002-K004). Not 1 mm: the zoo's
                       # ground cubes meet gripper_arm's jaw at q0 with exactly 1.0 mm of overlap
                       # by design (jaw bottom at z = 0.099, cube top at 0.100), a knife edge
AIR_GAP = 0.005        # m: a prop this far above everything starts in the air (K007)
BASELINE_EPISODES = 100  # episodes per baseline policy (K011): > 1% means at least 2 successes
EXPERT_EPISODES = 2    # unrandomised expert episodes that witness a friction-grasp task (K005)


def _finding(task, code: str, severity: str, message: str, hint: str, link: str | None = None) -> Finding:
    return Finding(code, severity, f"task {task.name}: {message}", hint, link=link,
                   file=None if task.source is None else str(task.source))


def check_task(task, *, simulate: bool = True, baselines: int = BASELINE_EPISODES) -> list[Finding]:
    """Findings K000-K011 for ``task`` (a :class:`tasks.schema.Task`), most severe first, then by
    code (see the module docstring for the rules). ``baselines``: episodes per baseline policy for
    K011 (0: skip it)."""
    from tasks.scene import build_scene

    try:
        ts = build_scene(task)
    except CaliperError as exc:
        return [Finding("K000", "Error", str(exc), "fix the named field: the robot path, q0 length and "
                        "limits, the gripper joint, or a prop name", file=None if task.source is None
                        else str(task.source))]
    findings = _start_state(ts)
    placement_errors = any(f.severity == "Error" for f in findings)
    findings += _verdict_at_start(ts)
    friction = ts.grasp == "friction"
    if not friction:
        findings += _reach(ts)
    if simulate and task.success is not None:
        from tasks.schema import Reached

        if isinstance(task.success, Reached):    # the gripper point on a goal: an IK pose witnesses it
            findings += _reach_witness(ts)
        else:
            findings += _expert_witness(ts) if friction else _witness(ts)
        if not placement_errors:
            findings += _passive(ts)
            if baselines and not any(f.code == "K010" for f in findings):
                findings += _baselines(ts, baselines)
    return sorted(findings, key=lambda f: (SEVERITIES.index(f.severity), f.code))


# ---- the start state ------------------------------------------------------------------------------

def _start_state(ts) -> list[Finding]:
    """K002 (robot), K003 (ground), K004 (props) and K007 (in the air) at q0."""
    import mujoco

    from tasks.witness import _Kin

    task, L = ts.task, ts.scene.layout
    kin = _Kin(ts)
    kin.set(ts.q0)
    mj, d = kin.mj, kin.d
    prop_of = {g: name for name, g in L.prop_geom.items()}
    fixture_of = {mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_GEOM, f.name): f.name for f in task.fixtures}
    body_name = lambda g: mujoco.mj_id2name(mj, mujoco.mjtObj.mjOBJ_BODY, int(mj.geom_bodyid[g]))
    deepest: dict = {}
    touching = set()
    for i in range(d.ncon):
        g1, g2, depth = int(d.contact.geom[i, 0]), int(d.contact.geom[i, 1]), float(-d.contact.dist[i])
        for a, b in ((g1, g2), (g2, g1)):
            if a in prop_of and depth > -AIR_GAP:
                touching.add(prop_of[a])
            if a in prop_of and (b in L.robot_geoms or b in fixture_of or (b in prop_of and a < b)):
                key = (prop_of[a], b)
                deepest[key] = max(deepest.get(key, -np.inf), depth)
    out = []
    for (prop, g), depth in deepest.items():
        if depth <= START_TOL:
            continue
        if g in L.robot_geoms:
            link = body_name(g)
            out.append(_finding(task, "K002", "Error",
                                f"prop {prop!r} overlaps robot link {link!r} by {depth * 1e3:.1f} mm at q0",
                                f"move prop {prop!r} (scene.props[].pos) clear of the arm, or change q0",
                                link))
        elif g in fixture_of:
            out.append(_finding(task, "K004", "Error",
                                f"prop {prop!r} overlaps fixture {fixture_of[g]!r} by {depth * 1e3:.1f} mm",
                                f"move {prop!r} (scene.props[].pos) clear of the fixture, or the fixture "
                                "(scene.fixtures[].pos)"))
        else:
            other = prop_of[g]
            out.append(_finding(task, "K004", "Error",
                                f"props {prop!r} and {other!r} overlap by {depth * 1e3:.1f} mm",
                                f"move {prop!r} or {other!r} apart (scene.props[].pos)"))
    if task.ground is not None:
        for p in task.props:
            gap = p.pos[2] - half_height(p) - task.ground
            if gap < -START_TOL:
                where = "lies entirely under" if gap < -2 * half_height(p) else "penetrates"
                out.append(_finding(task, "K003", "Error", f"prop {p.name!r} {where} the ground by "
                                    f"{-gap * 1e3:.1f} mm (bottom at z = {p.pos[2] - half_height(p):.4g}, "
                                    f"ground at {task.ground:g})",
                                    f"raise prop {p.name!r} to pos z = {task.ground + half_height(p):.4g} "
                                    "(resting on the ground)"))
            elif gap > AIR_GAP and p.name not in touching:
                rest = task.ground + half_height(p)
                out.append(_finding(task, "K007", "Warning",
                                    f"prop {p.name!r} starts {gap * 1e3:.0f} mm above the ground touching "
                                    "nothing: it drops at t = 0",
                                    f"set pos z = {rest:.4g} to rest it on the ground"))
    return out


def _verdict_at_start(ts) -> list[Finding]:
    from tasks.predicates import evaluate_np
    from tasks.witness import _Kin, grip_of, term_label

    task = ts.task
    nobody = np.zeros(len(ts.prop_names), bool)
    kin = _Kin(ts)
    kin.set(ts.q0)
    if task.success is None or not evaluate_np(task.success, ts.prop_names, ts.pos0, ts.pos0, ts.vel0,
                                                nobody, nobody, grip_of(ts, kin.d)):
        return []
    return [_finding(task, "K001", "Error", f"success {term_label(task.success)} is already true at t = 0",
                     "move the scored prop out of its zone, raise the lifted height, or move the reached "
                     "goal away from the gripper's start; success latches, so this task scores a policy that "
                     "does nothing")]


def _reach(ts) -> list[Finding]:
    """K006: props whose top face the jaw cannot grasp."""
    from tasks.schema import Reached
    from tasks.witness import grasps

    out = []
    for name, g in grasps(ts).items():
        if g.q is None and not (isinstance(ts.task.success, Reached) and ts.task.success.prop == name):
            # (a reached target is a marker the gripper hovers over, never grasped)
            out.append(_finding(ts.task, "K006", "Warning",
                                f"prop {name!r}: the jaw cannot grasp its top face: {g.why} "
                                f"(best miss {g.error * 1e3:.1f} mm)",
                                f"move prop {name!r} under the jaw's reach (for gripper_arm: top face "
                                "0.323-0.401 m from the shoulder, in the x-z plane)"))
    return out


# ---- simulated rules ------------------------------------------------------------------------------

def _witness(ts) -> list[Finding]:
    """K005 and K009."""
    from tasks.witness import term_label, verify_witness, witness

    task = ts.task
    hint = ("move the zone (scene.zones[].center) or the prop within the arm's reach, or lower the "
            "lifted height")
    try:
        w = witness(ts)
    except CaliperError as exc:
        return [Finding("K005", "Error", str(exc), hint,
                        file=None if task.source is None else str(task.source))]
    try:
        v = verify_witness(ts, w)
    except CaliperError as exc:
        return [_finding(task, "K005", "Error", f"the witness for {term_label(w.term)} could not be "
                         f"simulated: {exc}", hint)]
    out = []
    if not v.success:
        i = ts.prop_names.index(w.prop)
        end = ", ".join(f"{x:.4g}" for x in v.pos[i])
        speed = float(np.linalg.norm(v.vel[i]))
        out.append(_finding(task, "K005", "Error",
                            f"the witness for {term_label(w.term)} fails its settled simulation: prop "
                            f"{w.prop!r} ends at ({end}) moving {speed:.3g} m/s (drift "
                            f"{v.drift * 1e3:.1f} mm from the FK prediction)",
                            hint + ", or widen the zone"))
    if not w.path_clear:
        out.append(_finding(task, "K009", "Warning", f"the witness for {term_label(w.term)} carries prop "
                            f"{w.prop!r} through other geometry (no collision-free joint-space path found)",
                            "move the props that stand between the scored prop and its goal"))
    return out


def _expert_witness(ts) -> list[Finding]:
    """K005 for a friction-grasp task: its scripted expert must succeed in EXPERT_EPISODES
    unrandomised episodes on the CPU engine."""
    from tasks.demo import run_episodes
    from tasks.env import VecEnv
    from tasks.witness import term_label

    task = ts.task
    hint = ("move the zone (scene.zones[].center) or the prop within the arm's reach, or lower the "
            "lifted height")
    try:
        with VecEnv(ts, EXPERT_EPISODES, seed=0, randomization=None) as env:
            eps, expert = run_episodes(env, EXPERT_EPISODES)
    except CaliperError as exc:
        return [_finding(task, "K005", "Error", f"the scripted expert could not be run: {exc}", hint)]
    failed = [ep for ep in eps if not ep.success]
    if not failed:
        return []
    why = "; ".join(f"world {w} episode {e}: {what}" for w, e, what in expert.failed_plans[:2])
    return [_finding(task, "K005", "Error",
                     f"the scripted expert reaches {term_label(task.success)} in "
                     f"{len(eps) - len(failed)} of {len(eps)} unrandomised episodes"
                     + (f" ({why})" if why else ""), hint)]


def _reach_witness(ts) -> list[Finding]:
    """K005 for a ``reached`` success: an IK pose on the goal whose settled simulation succeeds."""
    from tasks.witness import reach_witness, term_label

    task = ts.task
    hint = ("move the target prop (scene.props[].pos) or lower its 'above' into the arm's reach, or widen "
            "the tolerance")
    try:
        w = reach_witness(ts)
    except CaliperError as exc:
        return [_finding(task, "K005", "Error", f"the witness for {term_label(task.success)} could not be "
                         f"simulated: {exc}", hint)]
    goal = ", ".join(f"{x:.3g}" for x in w.goal)
    if w.q is None:
        return [_finding(task, "K005", "Error", f"success {term_label(task.success)} is unreachable: no pose "
                         f"within the joint limits puts the gripper point on ({goal}) (best IK miss "
                         f"{w.ik_error * 1e3:.1f} mm)", hint)]
    if not w.success:
        return [_finding(task, "K005", "Error", f"the witness for {term_label(task.success)} fails its "
                         f"simulation: the gripper point settles {w.error * 1e3:.1f} mm from the goal "
                         f"({goal})", hint)]
    return []


def _passive(ts) -> list[Finding]:
    """K008 and K010: hold q0 for PASSIVE_S with nothing grasped, judging every 1/fps."""
    from mjx_backend.cpu import MujocoBackend
    from tasks.predicates import dwell_ticks, evaluate_np
    from tasks.witness import grip_of, term_label

    task, L, names = ts.task, ts.scene.layout, ts.prop_names
    dt = 1.0 / (task.fps or 50)
    nobody, need, run = np.zeros(len(names), bool), dwell_ticks(task, task.fps or 50), 0
    qadr = [L.prop_qposadr[n] for n in names]
    dadr = [L.prop_dofadr[n] for n in names]
    try:
        with MujocoBackend(ts.scene, q0=ts.q0) as b:
            b.enable()
            for k in range(int(round(PASSIVE_S / dt))):
                b.step(dt)
                d = b.world_data()
                pos = np.array([d.qpos[a:a + 3] for a in qadr]).reshape(-1, 3)
                vel = np.array([d.qvel[a:a + 3] for a in dadr]).reshape(-1, 3)
                hit = evaluate_np(task.success, names, pos, ts.pos0, vel, nobody, nobody, grip_of(ts, d))
                run = run + 1 if hit else 0
                if run >= need:
                    return [_finding(task, "K008", "Error",
                                     f"success {term_label(task.success)} turns true at t = "
                                     f"{(k + 1) * dt:.2f} s with the robot holding q0 and nothing grasped",
                                     "place the props where they rest outside every goal: a policy that does "
                                     "nothing would score")]
    except CaliperError as exc:
        return [_finding(task, "K010", "Error", f"the scene is unstable at rest: {exc}",
                         "separate overlapping bodies, or soften the prop materials")]
    return []


def _baselines(ts, episodes: int) -> list[Finding]:
    """K011: uniform random, sticky random and do-nothing policies, ``episodes`` each."""
    from tasks.baselines import MAX_RATE, STICKY_TICKS, baseline_rates
    from tasks.witness import term_label

    task = ts.task
    try:
        counts = baseline_rates(ts, episodes, seed=0)
    except CaliperError as exc:
        return [_finding(task, "K011", "Error", f"the baseline policies could not be run: {exc}",
                         "make the task run in tasks.env.VecEnv (position servos, a gripper)")]
    text = ", ".join(f"{c.policy} {c.successes}/{c.episodes}" for c in counts)
    gamed = [c for c in counts if c.games]
    if not gamed:
        return []
    worst = max(gamed, key=lambda c: c.rate)
    when = "" if worst.first is None else f" (first at tick {worst.first[1]} of episode {worst.first[0]})"
    return [_finding(task, "K011", "Error",
                     f"success {term_label(task.success)} is reached without doing the task: baseline "
                     f"successes {text} (seed 0, sticky draws held {STICKY_TICKS} ticks), more than "
                     f"{MAX_RATE:.0%} for {', '.join(c.policy for c in gamed)}{when}",
                     "require the grasp (lifted: \"held\": true; placed_in_zone: \"released\": true) and a "
                     "successDwellS, or move the zone where a push cannot reach it")]


__all__ = ["AIR_GAP", "BASELINE_EPISODES", "EXPERT_EPISODES", "PASSIVE_S", "START_TOL", "check_task"]
