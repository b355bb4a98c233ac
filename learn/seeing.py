"""Camera frames for every verb that runs a policy: one way to render them, one way to check them.

A policy trained on cameras (``features.cameras``) needs, every tick, the frames of exactly those
cameras. Every verb that runs one -- :func:`learn.evaluate.evaluate` (both engines) and
``serial_eval``, the Ray scale-out (:func:`learn.cluster.ray_evaluate`), the latency profiler
(:func:`learn.profile.profile_rollout`), the debugger's probes without a dataset
(:mod:`learn.debug`) and so the autopsy -- builds its CPU environment with :func:`policy_env`:
a :class:`tasks.env.VecEnv` that renders the policy's cameras with the JAX ray engine (all worlds
in one call) into ``info["images"]``, after a one-line refusal (:func:`learn.deploy.check_cameras`)
when the cameras asked for differ from the trained ones. :func:`check_task_cameras` is the same
refusal without building an environment (a driver checks before it ships work to Ray workers).
"""
from __future__ import annotations


def _trained(policy) -> bool:
    from learn.bundle import TrainedPolicy

    return isinstance(policy, TrainedPolicy)


def policy_cameras(policy, cameras=None):
    """The cameras an environment for ``policy`` renders: ``cameras`` when given, else a trained
    policy's own (``name:WxH``), else None (no rendering)."""
    if cameras is not None:
        return cameras
    feats = getattr(policy, "features", None) if _trained(policy) else None
    cams = () if feats is None else feats.cameras
    return [f"{c.name}:{c.width}x{c.height}" for c in cams] or None


def check_task_cameras(policy, ts, cameras=None) -> tuple:
    """The PinholeCameras an environment of built task ``ts`` would render for ``policy``
    (:func:`policy_cameras`), refused in one line when a trained policy was trained on others."""
    from learn.deploy import check_cameras
    from tasks.cameras import resolve_cameras

    cams = resolve_cameras(ts, policy_cameras(policy, cameras))
    if _trained(policy):
        check_cameras(policy, cams)
    return cams


def policy_env(policy, task, num_envs: int, *, seed: int = 0, cameras=None, nthread: int | None = None,
               **env_kwargs):
    """A :class:`tasks.env.VecEnv` of ``task`` with ``num_envs`` worlds that renders ``policy``'s
    cameras (or ``cameras``, refused unless they match a trained policy's) every step into
    ``info["images"]`` {camera: (num_envs, H, W, 3) uint8}. ``env_kwargs``: VecEnv's (randomisation)."""
    from learn.deploy import check_cameras
    from tasks.env import VecEnv

    env = VecEnv(task, num_envs, seed=seed, nthread=nthread, cameras=policy_cameras(policy, cameras),
                 **env_kwargs)
    if _trained(policy):
        try:
            check_cameras(policy, env.cameras)
        except BaseException:
            env.close()
            raise
    return env


def check_env_cameras(policy, env) -> None:
    """Refuse (one line) an existing environment whose cameras are not the ones ``policy`` (a
    TrainedPolicy; anything else passes) was trained on."""
    if _trained(policy):
        from learn.deploy import check_cameras

        check_cameras(policy, getattr(env, "cameras", ()))


__all__ = ["check_env_cameras", "check_task_cameras", "policy_cameras", "policy_env"]
