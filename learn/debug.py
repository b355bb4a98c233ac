"""Policy deploy debugger (P001-P008): "why does my trained policy do nothing?".

:func:`analyze_policy` takes a :class:`learn.bundle.TrainedPolicy` or a checkpoint directory and,
optionally, the dataset it was trained on and the robot's joint limits. It runs, in order:

1. static configuration checks on the raw config dict (P008 chunking, P005 cadence) -- before any
   model is built, so a configuration :mod:`learn.config` refuses to build is still diagnosed (a
   P008 Error stops there: there is nothing sound to load);
2. the normaliser against statistics recomputed from the dataset (P004);
3. behavioural probes: ``probes`` observation windows (replayed from the dataset when given, else
   drawn from the normaliser's statistics), one seeded forward pass each -- non-finite actions
   (P007, which skips the rest), collapsed action spread (P001), per-dof collapse (P002), joint-limit
   saturation (P003) and dead inputs (P006: each observation dimension nudged by +-0.25 of its std,
   with the same key and batch position, so sampling noise cancels; each camera of a policy that
   sees probed by giving every probe another probe's frames of that camera, the state held).

A policy that sees (``features.cameras``) is probed with camera frames too: the dataset's own
frames at the probed windows (decoded as training decodes them), or -- without a dataset -- the
frames rendered at ``task``'s reset states (:func:`learn.seeing.policy_env`, as evaluation renders
them); a dataset or task whose cameras differ from the trained ones is refused in one line.

Every check's numeric core is a pure function of measured numbers (``*_findings``), so tests can
plant exact cases. The output is deterministic for a (policy, dataset, seed).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from caliper_jax.errors import CaliperError
from doctors.asset.report import SEVERITIES, Finding
from learn.normalize import STD_FLOOR, Normalizer

SPREAD_MIN = 0.05          # P001 / P002: normalised action std across probes
MOVING_DOF_STD = 1e-4      # P002: a dof the data moves
LIMIT_FRACTION = 0.20      # P003
MEAN_SHIFT_SIGMA = 0.25    # P004
STD_RATIO = 1.5            # P004: saved/recomputed std outside [1/1.5, 1.5]
PERTURB_SIGMA = 0.25       # P006
RESPONSE_MIN = 0.02        # P006
_LIST = 6                  # dims named in one message


def _sorted(findings) -> list[Finding]:
    return sorted(findings, key=lambda f: (SEVERITIES.index(f.severity), f.code))


def _name(names, i: int, what: str) -> str:
    return str(names[i]) if names is not None and i < len(names) else f"{what}[{i}]"


def _listing(idx, names, what) -> str:
    idx = list(idx)
    shown = ", ".join(_name(names, int(i), what) for i in idx[:_LIST])
    return shown + (f" and {len(idx) - _LIST} more" if len(idx) > _LIST else "")


# -- static checks ---------------------------------------------------------------------------------
def _config_value(config: dict, name: str):
    """``config[name]``, else the default of the config's kind (else PolicyConfig's)."""
    if name in config:
        return config[name]
    from learn.config import POLICY_CONFIGS, PolicyConfig

    cls = POLICY_CONFIGS.get(config.get("kind"), PolicyConfig)
    return getattr(cls, name, getattr(PolicyConfig, name, None))


def config_findings(config: dict, train_fps=None, data_fps=None) -> list[Finding]:
    """P008 (chunking) of a raw policy config dict and P005 (``train_fps`` != ``data_fps``)."""
    out = []
    chunk = _config_value(config, "chunk_size")
    steps = _config_value(config, "n_action_steps")
    ens = _config_value(config, "temporal_ensemble")
    if isinstance(chunk, int) and isinstance(steps, int):
        if steps > chunk:
            out.append(Finding(
                "P008", "Error",
                f"n_action_steps ({steps}) > chunk_size ({chunk}): deploy would pop more actions than a "
                "forward pass produces -- the queue runs dry mid-chunk",
                "set n_action_steps <= chunk_size (lerobot's default pairs n_action_steps = chunk_size)"))
        if ens is not None and steps != 1:
            out.append(Finding(
                "P008", "Error",
                f"temporal ensembling (temporal_ensemble={ens}) with n_action_steps={steps}: ensembling "
                "re-runs the network every tick and needs n_action_steps == 1",
                "set n_action_steps to 1, or turn temporal_ensemble off"))
        if chunk > 1 and steps == 1 and ens is None:
            out.append(Finding(
                "P008", "Info",
                f"chunk_size {chunk} with n_action_steps 1 and no temporal ensembling: the network re-runs "
                f"every tick and throws away {chunk - 1} of its {chunk} predicted actions -- legal, but "
                "wasteful",
                "raise n_action_steps (e.g. to chunk_size) or enable temporal ensembling to use the chunk"))
    if train_fps is not None and data_fps is not None and float(train_fps) != float(data_fps):
        out.append(Finding(
            "P005", "Error",
            f"the policy was trained at {train_fps:g} fps but the dataset is recorded at {data_fps:g} fps: "
            "every queued action is worth a different span of real time than it was trained for",
            "train and deploy at the collection cadence (dt = 1/fps of the dataset); retrain on this "
            "dataset or pair the checkpoint with the dataset it was trained on"))
    return _sorted(out)


# -- normaliser ------------------------------------------------------------------------------------
def normalizer_findings(saved: Normalizer, recomputed: Normalizer, obs_names=None,
                        action_names=None) -> list[Finding]:
    """P004: the saved statistics against ones recomputed from the dataset (both floored at
    STD_FLOOR): |mean shift| > 0.25 recomputed sigma or std ratio outside [1/1.5, 1.5]."""
    out = []
    s, r = saved, recomputed
    for side, names, sm, ss, rm, rs in (
            ("observation", obs_names, s.obs_mean, s.obs_std, r.obs_mean, r.obs_std),
            ("action", action_names, s.act_mean, s.act_std, r.act_mean, r.act_std)):
        sm, ss, rm, rs = (np.asarray(x, np.float64).reshape(-1) for x in (sm, ss, rm, rs))
        if sm.shape != rm.shape:
            out.append(Finding(
                "P004", "Error",
                f"{side} normalisation has {sm.size} dims but the dataset provides {rm.size}: the policy was "
                "trained on a different feature layout",
                "pair the checkpoint with the dataset it was trained on, or retrain"))
            continue
        ss, rs = np.maximum(ss, STD_FLOOR), np.maximum(rs, STD_FLOOR)
        shift = np.abs(sm - rm) / rs
        ratio = ss / rs
        bad = np.flatnonzero((shift > MEAN_SHIFT_SIGMA) | (ratio > STD_RATIO) | (ratio < 1.0 / STD_RATIO))
        if bad.size:
            worst = int(bad[np.argmax(np.maximum(shift[bad], np.abs(np.log(ratio[bad]))))])
            out.append(Finding(
                "P004", "Error",
                f"{side} normalisation disagrees with the dataset on {bad.size} dim(s) "
                f"({_listing(bad, names, side)}); "
                f"worst {_name(names, worst, side)}: mean shift {shift[worst]:.2f} sigma, std ratio "
                f"{ratio[worst]:.2f} -- the policy trained in one coordinate system and deploys in another",
                "the dataset was edited or regrown after training, or this is the wrong checkpoint for it: "
                "retrain, or refit the normaliser on this dataset"))
    return _sorted(out)


# -- behavioural checks ----------------------------------------------------------------------------
def nonfinite_findings(actions) -> list[Finding]:
    """P007: NaN/inf anywhere in the probed actions (any shape)."""
    a = np.asarray(actions, np.float64)
    bad = ~np.isfinite(a)
    if not bad.any():
        return []
    return [Finding(
        "P007", "Error",
        f"{int(bad.sum())} of {a.size} probed action values are NaN/inf: the forward pass is non-finite, so "
        "the other behavioural checks were skipped",
        "look for NaN/inf tensors in the saved weights and for loss spikes in the training run; check the "
        "normaliser for zero or non-finite std")]


def action_spread(actions_normalised) -> float:
    """Mean over action dims of the std across probes of normalised actions (P, A)."""
    a = np.asarray(actions_normalised, np.float64)
    return float(np.mean(np.std(a.reshape(a.shape[0], -1), axis=0)))


def spread_findings(actions_normalised) -> list[Finding]:
    """P001: normalised action spread (P probes, A dims) below 0.05."""
    a = np.asarray(actions_normalised, np.float64)
    spread = action_spread(a)
    if spread >= SPREAD_MIN:
        return []
    return [Finding(
        "P001", "Error",
        f"every probe state returns nearly the same action (normalised spread {spread:.4f} < {SPREAD_MIN} "
        f"over {a.shape[0]} probes): the policy is a constant -- usually the dataset mean, the L2 optimum of "
        "labels it could not learn, so the training loss looked fine",
        "check for zeroed or corrupted weights, then whether the state->action map is one-to-many (see the "
        "dataset doctor's D004/D006)")]


def per_dof_findings(actions_normalised, data_action_std, names=None) -> list[Finding]:
    """P002: dofs the data moves (std >= 1e-4) whose normalised probe std is below 0.05."""
    a = np.asarray(actions_normalised, np.float64)
    a = a.reshape(a.shape[0], -1)
    moving = np.asarray(data_action_std, np.float64).reshape(-1) >= MOVING_DOF_STD
    std = np.std(a, axis=0)
    out = []
    for d in np.flatnonzero(moving & (std < SPREAD_MIN)):
        out.append(Finding(
            "P002", "Warning",
            f"action dof {_name(names, int(d), 'action')} moves in the data (std {data_action_std[d]:.4g}) "
            f"but the policy never moves it (normalised spread {std[d]:.4f} < {SPREAD_MIN}): that joint "
            "will not track at deploy, and nothing errors",
            "look at the dof's loss contribution and its normalisation std -- a too-large std shrinks its "
            "targets until the network ignores the joint"))
    return out


def limit_findings(actions, lower, upper, names=None) -> list[Finding]:
    """P003: per dof, more than 20% of probed actions (N, A) outside [lower, upper] (infinite bounds
    never fire)."""
    a = np.asarray(actions, np.float64)
    a = a.reshape(-1, a.shape[-1])
    lo = np.asarray(lower, np.float64).reshape(-1)
    hi = np.asarray(upper, np.float64).reshape(-1)
    if lo.size != a.shape[1] or hi.size != a.shape[1]:
        raise CaliperError(f"joint limits have {lo.size}/{hi.size} entries but actions have "
                           f"{a.shape[1]} dims")
    frac = np.mean((a < lo) | (a > hi), axis=0)
    out = []
    for d in np.flatnonzero(frac > LIMIT_FRACTION):
        out.append(Finding(
            "P003", "Warning",
            f"action dof {_name(names, int(d), 'action')}: {100 * frac[d]:.0f}% of probed actions fall "
            f"outside its limits [{lo[d]:.4g}, {hi[d]:.4g}]: the safety gate clamps every tick, so the "
            "robot runs, but not what the policy intended",
            "almost always an unnormalisation-scale problem: check P004 and the action std in the saved "
            "normaliser; genuine limit-riding demonstrations are rare"))
    return out


def input_response(base_normalised, perturbed_normalised) -> np.ndarray:
    """(D,) largest change of the normalised action per perturbed obs dim: ``base`` (P, A),
    ``perturbed`` (D, S, P, A) (S signs); the max is over signs, probes and action dims."""
    base = np.asarray(base_normalised, np.float64)
    pert = np.asarray(perturbed_normalised, np.float64)
    return np.max(np.abs(pert - base[None, None]), axis=(1, 2, 3))


def dead_input_findings(response, data_obs_std, names=None) -> list[Finding]:
    """P006: obs dims whose +-0.25 sigma nudge moves the normalised action by < 0.02 (max over
    probe bases), skipping dims the data holds constant (std <= STD_FLOOR)."""
    r = np.asarray(response, np.float64).reshape(-1)
    live = np.asarray(data_obs_std, np.float64).reshape(-1) > STD_FLOOR
    out = []
    for d in np.flatnonzero(live & (r < RESPONSE_MIN)):
        out.append(Finding(
            "P006", "Warning",
            f"observation dim {_name(names, int(d), 'observation')} is a dead input: nudging it by "
            f"+-{PERTURB_SIGMA} of its std changes the normalised action by at most {r[d]:.4f} "
            f"(< {RESPONSE_MIN}) over every probe -- the policy cannot close the loop on it",
            "check the feature wiring, and whether the dim was constant in training (the dataset doctor's "
            "D001 -- then the dataset, not the policy, is the defect)"))
    return out


# -- inputs ----------------------------------------------------------------------------------------
def read_checkpoint_config(path) -> tuple[dict, dict | None]:
    """(raw policy config dict, raw feature layout dict or None) of a checkpoint -- a
    :mod:`learn.checkpoint` folder, an exported ``.safetensors`` file, or any folder whose JSON
    files hold them -- read without building anything (so a config :mod:`learn.config` would
    refuse still gets diagnosed)."""
    from learn import checkpoint as ck

    root = Path(path)
    if root.is_file() and root.suffix == ".safetensors":
        meta = ck.safetensors_metadata(root)
        try:
            config = json.loads(meta["config"])
            features = json.loads(meta["features"]) if "features" in meta else None
        except (KeyError, ValueError) as exc:
            raise CaliperError(f"{root}: no readable policy config in its metadata ({exc})") from None
        return config, features
    if (root / ck.META_NAME).is_file():
        meta = ck.read_checkpoint_meta(root)
        if not isinstance(meta["config"], dict):
            raise CaliperError(f"{root / ck.META_NAME}: corrupt checkpoint metadata (config is not an "
                               "object)")
        return meta["config"], meta.get("features") if isinstance(meta.get("features"), dict) else None
    if not root.is_dir():
        raise CaliperError(f"{root}: not a checkpoint (no such folder or .safetensors file)")
    files = sorted(root.glob("*.json")) + sorted(root.glob("*/*.json"))
    config = features = None
    for file in files:
        try:
            data = json.loads(file.read_text())
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        if not isinstance(data, dict):
            continue
        for cand in [data] + [v for v in data.values() if isinstance(v, dict)]:
            if config is None and "kind" in cand and ("chunk_size" in cand or "n_action_steps" in cand):
                config = cand
            if features is None and "fps" in cand and ("state_keys" in cand or "action_key" in cand):
                features = cand
    if config is None:
        listed = ", ".join(f.name for f in files) or "no JSON files"
        raise CaliperError(f"{root}: not a caliper checkpoint (no {ck.META_NAME}, and no JSON object with a "
                           f"'kind' and a 'chunk_size' among {listed})")
    return config, features


def _load_checkpoint(path):
    """The :class:`learn.bundle.TrainedPolicy` of a checkpoint folder or ``.safetensors`` file."""
    from learn import checkpoint as ck

    path = Path(path)
    if path.is_file() and path.suffix == ".safetensors":
        return ck.load_safetensors_policy(path)
    return ck.load_checkpoint(path).policy


def _dataset(root, layout):
    """(obs episodes, action episodes, fps, obs names, action names, images) of the features
    ``layout`` reads; ``images(episode) -> (T, cameras, H, W, 3)`` uint8 decodes the frames of
    ``layout.cameras`` (None without cameras)."""
    from caliper_jax.dataset.reader import LeRobotReader

    reader = LeRobotReader(root)
    images = _dataset_images(root, reader, layout) if layout.cameras else None
    keys = list(layout.state_keys) + [layout.action_key]
    for key, dim in zip(keys, list(layout.state_dims) + [layout.action_dim], strict=True):
        feat = reader.features.get(key)
        if feat is None:
            raise CaliperError(f"{root}: the policy reads feature {key!r}, which the dataset lacks "
                               f"(features: {', '.join(sorted(reader.features))})")
        if list(feat.get("shape", [])) != [dim]:
            raise CaliperError(f"{root}: feature {key!r} has shape {feat.get('shape')}, the policy reads "
                               f"[{dim}]")
    obs, act = [], []
    for ep in range(reader.num_episodes):
        cols = reader.episode(ep, keys)
        obs.append(np.concatenate([np.asarray(cols[k], np.float64).reshape(len(cols[k]), -1)
                                   for k in layout.state_keys], axis=1))
        act.append(np.asarray(cols[layout.action_key], np.float64).reshape(len(cols[layout.action_key]), -1))

    def names(key, dim):
        n = reader.features[key].get("names")
        n = n if isinstance(n, list) and len(n) == dim else [f"{i}" for i in range(dim)]
        return [f"{key}.{x}" for x in n]

    obs_names = [x for k, d in zip(layout.state_keys, layout.state_dims, strict=True) for x in names(k, d)]
    return obs, act, reader.fps, obs_names, names(layout.action_key, layout.action_dim), images


def _dataset_images(root, reader, layout):
    """The decoder of the dataset's frames of ``layout.cameras`` (episode -> (T, C, H, W, 3)),
    refused in one line when the dataset's cameras are not the trained ones."""
    from learn.data import _camera_records, episode_images
    from learn.features import _cameras_of, camera_mismatch

    present = {k: v for k, v in reader.features.items() if k in {c.key for c in layout.cameras}}
    diff = camera_mismatch(layout.cameras, _cameras_of(present, _camera_records(root)))
    if diff is not None:
        raise CaliperError(f"{root}: camera configuration differs from training ({diff}; trained vs "
                           "dataset): the probes would show the policy images it was not trained on")
    cache: dict = {}

    def images(ep: int):
        if ep not in cache:
            cache[ep] = episode_images(reader, ep, layout, int(reader.episode_meta(ep)["length"]))
        return cache[ep]

    return images


def recompute_normalizer(obs_episodes, action_episodes) -> Normalizer:
    """:meth:`Normalizer.fit` of every finite frame."""
    obs = np.concatenate(obs_episodes)
    act = np.concatenate(action_episodes)
    ok = np.isfinite(obs).all(1) & np.isfinite(act).all(1)
    if not ok.any():
        raise CaliperError("the dataset holds no finite frame to recompute statistics from")
    return Normalizer.fit(obs[ok], act[ok])


def probe_frames(obs_episodes, n_obs: int, probes: int, seed: int) -> list[tuple[int, np.ndarray]]:
    """[(episode, frame indices (n_obs,))] of ``probes`` seeded windows ending at frames with finite
    observations; indices < 0 are frames before the episode's start."""
    frames = [(e, t) for e, o in enumerate(obs_episodes) for t in np.flatnonzero(np.isfinite(o).all(1))]
    if not frames:
        raise CaliperError("the dataset holds no finite observation to probe the policy with")
    rng = np.random.default_rng(seed)
    pick = rng.choice(len(frames), size=probes, replace=len(frames) < probes)
    ends = [frames[int(j)] for j in pick]
    return [(e, np.arange(t - n_obs + 1, t + 1)) for e, t in ends]


def dataset_windows(obs_episodes, n_obs: int, probes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(windows (P, n_obs, D), mask (P, n_obs)) ending at ``probes`` seeded frames with finite
    observations (:func:`probe_frames`); frames before an episode's start repeat its first frame
    (mask False)."""
    return windows_at(obs_episodes, probe_frames(obs_episodes, n_obs, probes, seed))


def windows_at(obs_episodes, picks) -> tuple[np.ndarray, np.ndarray]:
    """(windows (P, n_obs, D), mask (P, n_obs)) of the windows ``picks`` (:func:`probe_frames`)."""
    win = np.stack([obs_episodes[e][np.maximum(idx, 0)] for e, idx in picks]).astype(np.float64)
    mask = np.stack([idx >= 0 for _, idx in picks])
    return win, mask


def image_windows(images, picks) -> np.ndarray:
    """(P, n_obs, cameras, H, W, 3) uint8 frames of the windows ``picks`` (:func:`probe_frames`),
    padded as :func:`dataset_windows` pads; ``images(episode)`` decodes an episode's frames."""
    return np.stack([images(e)[np.maximum(idx, 0)] for e, idx in picks])


def rendered_windows(policy, task, n_obs: int, probes: int, seed: int):
    """(windows (P, n_obs, D), mask (P, n_obs), frames (P, n_obs, cameras, H, W, 3)) of ``probes``
    worlds of ``task`` at their reset states (seed ``seed``), with the policy's cameras rendered
    as evaluation renders them (:func:`learn.seeing.policy_env`); each window is an episode's first
    tick as deploy sees it (earlier frames repeat it, mask False)."""
    from learn.deploy import stack_images
    from learn.features import env_observation
    from learn.seeing import policy_env

    fl = policy.features
    with policy_env(policy, task, probes, seed=seed) as env:
        obs, info = env.reset(seed=seed)
        state = np.asarray(env_observation(fl, env.layout, np.asarray(obs, np.float32)), np.float64)
        frames = np.asarray(stack_images(info.get("images"), [c.name for c in fl.cameras]))
    mask = np.zeros((probes, n_obs), bool)
    mask[:, -1] = True
    return (np.repeat(state[:, None], n_obs, axis=1), mask,
            np.repeat(frames[:, None], n_obs, axis=1))


def normalizer_windows(normalizer: Normalizer, n_obs: int, probes: int, seed: int):
    """(windows, mask) of resting states drawn from N(obs_mean, obs_std) (one state per window)."""
    rng = np.random.default_rng(seed)
    mean = np.asarray(normalizer.obs_mean, np.float64)
    std = np.asarray(normalizer.obs_std, np.float64)
    states = mean + std * rng.standard_normal((probes, mean.size))
    return np.repeat(states[:, None], n_obs, axis=1), np.ones((probes, n_obs), bool)


def _limits(robot_limits):
    if robot_limits is None:
        return None
    if hasattr(robot_limits, "qpos_lower"):
        lo, hi = robot_limits.qpos_lower, robot_limits.qpos_upper
    else:
        lo, hi = robot_limits
    return np.asarray(lo, np.float64).reshape(-1), np.asarray(hi, np.float64).reshape(-1)


# -- the debugger ----------------------------------------------------------------------------------
def analyze_policy(policy_or_checkpoint_dir, dataset_root=None, *, robot_limits=None, probes: int = 32,
                   seed: int = 0, task=None) -> list[Finding]:
    """P001-P008 findings of a :class:`learn.bundle.TrainedPolicy` or a checkpoint directory, most
    severe first ([] when every reachable check passed). ``dataset_root`` unlocks P002, P004, P005
    and dataset-replayed probes; ``robot_limits`` -- (lower, upper) arrays or a model with
    ``qpos_lower``/``qpos_upper`` -- unlocks P003. ``task``: where a policy that sees gets its
    probe frames rendered when no dataset is given (module doc)."""
    from learn.config import config_to_dict

    source = policy_or_checkpoint_dir
    policy = None
    if isinstance(source, (str, Path)):
        config, feats = read_checkpoint_config(source)
        train_fps = None if feats is None else feats.get("fps")
    else:
        policy = source
        config, train_fps = config_to_dict(policy.config), policy.features.fps
    data_fps = None
    if dataset_root is not None:
        from caliper_jax.dataset.reader import LeRobotReader
        data_fps = LeRobotReader(dataset_root).fps
    findings = config_findings(config, train_fps, data_fps)
    if any(f.code == "P008" and f.severity == "Error" for f in findings):
        return _sorted(findings)
    if policy is None:
        policy = _load_checkpoint(source)
        if train_fps is None:
            findings += config_findings({}, policy.features.fps, data_fps)
    data = None if dataset_root is None else _dataset(dataset_root, policy.features)
    findings += behaviour_findings(policy, data, robot_limits=robot_limits, probes=probes, seed=seed,
                                   task=None if data is not None else task)
    return _sorted(findings)


def behaviour_findings(policy, data=None, *, robot_limits=None, probes: int = 32, seed: int = 0,
                       task=None) -> list[Finding]:
    """P004 and the probes (P007, P001, P002, P003, P006) of a loaded policy; ``data`` is
    (obs episodes, action episodes, fps, obs names, action names[, images]) or None. A policy that
    sees is probed with the dataset's frames, else with frames rendered at ``task``'s reset states
    (module doc); with neither it is refused in one line."""
    import jax

    cfg, norm, fl = policy.config, policy.normalizer, policy.features
    n_obs = int(cfg.n_obs_steps)
    out = []
    frames = None
    if data is not None:
        obs_eps, act_eps, _, obs_names, act_names = data[:5]
        recomputed = recompute_normalizer(obs_eps, act_eps)
        out += normalizer_findings(norm, recomputed, obs_names, act_names)
        picks = probe_frames(obs_eps, n_obs, probes, seed)
        windows, mask = windows_at(obs_eps, picks)
        if fl.cameras:
            images = data[5] if len(data) > 5 else None
            if images is None:
                raise CaliperError("this policy sees cameras but the probe data carries no camera frames")
            frames = image_windows(images, picks)
        data_obs_std = recomputed.obs_std
        raw_act = np.concatenate(act_eps)
        data_act_std = np.std(raw_act[np.isfinite(raw_act).all(1)], axis=0)   # unfloored
    else:
        obs_names = [f"{k}[{i}]" for k, d in zip(fl.state_keys, fl.state_dims, strict=True) for i in range(d)]
        act_names = [f"{fl.action_key}[{i}]" for i in range(fl.action_dim)]
        if fl.cameras:
            if task is None:
                names = ", ".join(c.name for c in fl.cameras)
                raise CaliperError(f"this policy sees cameras ({names}): its probes need frames -- give the "
                                   "dataset it was trained on (--dataset) or a task to render them (--task)")
            windows, mask, frames = rendered_windows(policy, task, n_obs, probes, seed)
        else:
            windows, mask = normalizer_windows(norm, n_obs, probes, seed)
        data_obs_std, data_act_std = norm.obs_std, None
    fn, graphdef, state = policy.chunk_fn()
    run = jax.jit(fn, static_argnums=0)
    key = jax.random.PRNGKey(seed)
    mask = np.asarray(mask, bool)

    def forward(x, imgs=frames):
        return np.asarray(run(graphdef, state, np.asarray(x, np.float32), mask, key, imgs), np.float64)

    chunks = forward(windows)                                     # (P, chunk, A) raw
    bad = nonfinite_findings(chunks)
    if bad:
        return out + bad
    first = np.asarray(norm.action(chunks[:, 0]), np.float64)     # the executed action, normalised
    p001 = spread_findings(first)
    out += p001
    if data_act_std is not None and not p001:
        out += per_dof_findings(first, data_act_std, act_names)
    limits = _limits(robot_limits)
    if limits is not None:
        executed = chunks[:, :max(1, int(cfg.n_action_steps))]
        out += limit_findings(executed, limits[0], limits[1], act_names)
    if p001:        # a constant policy ignores every input: P006 would only repeat P001
        return out
    std = np.asarray(data_obs_std, np.float64)
    live = np.flatnonzero(std > STD_FLOOR)
    response = np.full(std.size, np.inf)
    for d in live:
        moved = []
        for sign in (1.0, -1.0):
            x = windows.copy()
            x[..., d] += sign * PERTURB_SIGMA * std[d]
            moved.append(norm.action(forward(x)[:, 0]))
        response[d] = input_response(first, np.asarray(moved)[None])[0]
    out += dead_input_findings(response, std, obs_names)
    if frames is not None:
        out += dead_camera_findings(camera_response(forward, windows, frames, first, norm),
                                    [c.key for c in fl.cameras])
    return out


def camera_response(forward, windows, frames, base_normalised, norm) -> np.ndarray:
    """(cameras,) largest change of the normalised action when every probe is shown the next
    probe's frames of one camera (a cyclic shift over probes; the state and the other cameras
    held); NaN for a camera whose frames are the same in every probe (nothing to swap)."""
    out = np.full(frames.shape[2], np.nan)
    for c in range(frames.shape[2]):
        swapped = frames.copy()
        swapped[:, :, c] = np.roll(frames[:, :, c], 1, axis=0)
        if np.array_equal(swapped, frames):
            continue
        moved = norm.action(forward(windows, swapped)[:, 0])
        out[c] = input_response(base_normalised, np.asarray(moved)[None, None])[0]
    return out


def dead_camera_findings(response, names) -> list[Finding]:
    """P006 of cameras: a camera whose frames, swapped between probes, move the normalised action
    by < 0.02 (NaN responses -- identical frames in every probe -- never fire)."""
    r = np.asarray(response, np.float64).reshape(-1)
    out = []
    for c in np.flatnonzero(np.isfinite(r) & (r < RESPONSE_MIN)):
        out.append(Finding(
            "P006", "Warning",
            f"camera {names[c]} is a dead input: showing each probe another probe's frames of it changes "
            f"the normalised action by at most {r[c]:.4f} (< {RESPONSE_MIN}) -- the policy does not look",
            "check the image wiring (camera order, normalisation) and whether the frames vary in training; "
            "a policy that learned to ignore its cameras acts from the joint state alone"))
    return out


__all__ = ["action_spread", "analyze_policy", "behaviour_findings", "camera_response", "config_findings",
           "dataset_windows", "dead_camera_findings", "dead_input_findings", "image_windows", "probe_frames",
           "rendered_windows", "input_response", "limit_findings", "nonfinite_findings", "windows_at",
           "normalizer_findings", "normalizer_windows", "per_dof_findings", "read_checkpoint_config",
           "recompute_normalizer", "spread_findings"]
