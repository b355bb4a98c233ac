"""Checkpoints of a policy in training, and pickle-free weight export.

A checkpoint is a folder::

    caliper_checkpoint.json   format + version, policy config, train config, feature layout,
                              normalisation statistics, dataset fingerprint, step, rng key, extra,
                              the path/shape/dtype of every saved array and the sha256 of every
                              other file (written last)
    params/                   orbax: the model's state (all but RNG variables) as a pure dict
    opt_state/, ema_state/    orbax, when given

It is written into a temporary sibling folder and renamed into place (an existing checkpoint is
swapped out atomically with ``overwrite=True``), so a crash never leaves a half-written
checkpoint under the final name. Loading refuses, with one line naming the reason, a checkpoint
trained on another dataset (fingerprint) or feature layout, an unknown format version, missing or
corrupt files, and any folder holding a pickle-format file (pickles execute code when loaded).

:func:`export_safetensors` writes the weights alone as safetensors (flat ``a.b.c`` names, config,
features and normaliser as JSON metadata): the deployable artifact, no pickle anywhere.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from caliper_jax.errors import CaliperError
from caliper_jax.limits import inside
from learn.bundle import TrainedPolicy
from learn.config import config_from_dict, config_to_dict, train_config_from_dict
from learn.features import FeatureLayout
from learn.normalize import Normalizer

FORMAT = "caliper-policy-checkpoint"
FORMAT_VERSION = 1
META_NAME = "caliper_checkpoint.json"
SAFETENSORS_FORMAT = "caliper-policy-weights"
PICKLE_SUFFIXES = (".pkl", ".pickle", ".pt", ".pth", ".bin", ".ckpt")
TREES = ("params", "opt_state", "ema_state")


# -- dataset fingerprint --------------------------------------------------------------------------
def dataset_fingerprint(root) -> str:
    """sha256 (hex) over ``meta/info.json``'s features and fps and, in sorted order, the relative
    path, size and bytes of every ``data/**/*.parquet``: identical for a copy of the dataset
    folder, different when any recorded value changes."""
    from caliper_jax.dataset.format import load_info

    root = Path(root)
    info = load_info(root)
    h = hashlib.sha256()
    h.update(json.dumps({"features": info["features"], "fps": info["fps"]}, sort_keys=True).encode())
    files = sorted((p.relative_to(root).as_posix(), p) for p in (root / "data").rglob("*.parquet"))
    if not files:
        raise CaliperError(f"{root}: no data parquet files under data/ (nothing to fingerprint)")
    for rel, p in files:
        h.update(f"\0{rel}\0{p.stat().st_size}\0".encode())
        with open(p, "rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
    return h.hexdigest()


# -- array trees ----------------------------------------------------------------------------------
def _key_name(entry) -> str:
    for attr in ("key", "name", "idx"):
        if hasattr(entry, attr):
            return str(getattr(entry, attr))
    return str(entry)


def flatten_tree(tree) -> dict:
    """{"a.b.c": leaf} of a pytree (dict keys, sequence indices, attribute names joined by '.')."""
    import jax

    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    return {".".join(_key_name(k) for k in path): leaf for path, leaf in leaves}


def _describe(tree) -> dict:
    """{"a.b.c": [shape, dtype]} of every array of ``tree``."""
    return {k: [list(np.shape(v)), str(getattr(v, "dtype", None) or np.asarray(v).dtype)]
            for k, v in flatten_tree(tree).items()}


def model_params(model) -> dict:
    """The model's state except RNG variables, as a pure nested dict of arrays."""
    from flax import nnx

    return nnx.to_pure_dict(nnx.state(model, nnx.Not(nnx.RngState)))


def set_model_params(model, params: dict):
    """Write a :func:`model_params` dict into ``model`` (in place; returns it)."""
    import jax
    import jax.numpy as jnp
    from flax import nnx

    state = nnx.state(model, nnx.Not(nnx.RngState))
    nnx.replace_by_pure_dict(state, jax.tree_util.tree_map(jnp.asarray, params))
    nnx.update(model, state)
    return model


def _check_like(saved: dict, template, what: str, where) -> None:
    """Raise naming the first array of ``template`` whose shape/dtype differs from ``saved``
    (a :func:`_describe` dict)."""
    want = _describe(template)
    missing = [k for k in want if k not in saved]
    extra = [k for k in saved if k not in want]
    if missing or extra:
        raise CaliperError(f"{where}: {what} do not match the model: "
                           + "; ".join(x for x in (f"missing {missing[:4]}" if missing else "",
                                                   f"unexpected {extra[:4]}" if extra else "") if x))
    for k, (shape, dtype) in want.items():
        if list(saved[k][0]) != shape or saved[k][1] != dtype:
            raise CaliperError(f"{where}: {what} tensor {k!r} is {tuple(saved[k][0])} {saved[k][1]} but the "
                               f"model's is {tuple(shape)} {dtype}")


def _check_leaves(saved: dict, template, what: str, where) -> None:
    """Like :func:`_check_like` for trees whose key names may differ in form (optimizer states):
    leaves compared in order."""
    got, want = list(saved.items()), list(_describe(template).items())
    if len(got) != len(want):
        raise CaliperError(f"{where}: {what} has {len(got)} arrays, the template {len(want)} (a different "
                           f"optimizer or model?)")
    for (name, (s1, d1)), (tname, (s2, d2)) in zip(got, want, strict=True):
        if list(s1) != s2 or d1 != d2:
            raise CaliperError(f"{where}: {what} array {name!r} is {tuple(s1)} {d1} but the template's "
                               f"{tname!r} is {tuple(s2)} {d2}")


def _rng_to_json(rng):
    if rng is None:
        return None
    import jax
    import jax.numpy as jnp

    typed = jnp.issubdtype(rng.dtype, jax.dtypes.prng_key)
    data = np.asarray(jax.random.key_data(rng) if typed else rng)
    if data.dtype != np.uint32:
        raise CaliperError(f"rng must be a JAX PRNG key, got dtype {data.dtype}")
    return {"typed": bool(typed), "impl": str(jax.random.key_impl(rng)) if typed else None,
            "shape": list(data.shape), "data": data.reshape(-1).tolist()}


def _rng_from_json(d):
    if d is None:
        return None
    import jax
    import jax.numpy as jnp

    data = jnp.asarray(np.asarray(d["data"], np.uint32).reshape(d["shape"]))
    return jax.random.wrap_key_data(data, impl=d["impl"]) if d["typed"] else data


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _verify_files(path: Path, meta: dict) -> None:
    """Every file the save recorded is present with its recorded sha256."""
    files = meta.get("files")
    if not isinstance(files, dict) or not files:
        raise CaliperError(f"{path / META_NAME}: corrupt checkpoint metadata (no file list)")
    for rel, digest in files.items():
        f = inside(path, rel, f"{path / META_NAME}: files")
        if not f.is_file():
            raise CaliperError(f"{path}: {rel} is missing (corrupt checkpoint)")
        if _sha256(f) != digest:
            raise CaliperError(f"{path}: {rel} changed since it was saved (checksum mismatch; corrupt "
                               f"checkpoint)")


# -- save -----------------------------------------------------------------------------------------
def _checkpoint_meta(*, model, config, train_config, features: FeatureLayout, normalizer: Normalizer,
                     fingerprint, step, opt_state, ema_state, rng, extra) -> tuple[dict, dict]:
    """(the array trees to save by name, the metadata without the file list), checked JSON-able
    before anything is written."""
    trees = {"params": model_params(model), "opt_state": opt_state, "ema_state": ema_state}
    trees = {name: t for name, t in trees.items() if t is not None}
    meta = {"format": FORMAT, "format_version": FORMAT_VERSION, "config": config_to_dict(config),
            "train_config": None if train_config is None else config_to_dict(train_config),
            "features": features.to_dict(), "normalizer": normalizer.to_dict(), "fingerprint": fingerprint,
            "step": int(step), "rng": _rng_to_json(rng), "extra": extra,
            "arrays": {name: [[k, *v] for k, v in _describe(t).items()]  # in leaf order
                       for name, t in trees.items()}}
    try:
        json.dumps(meta, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise CaliperError(f"checkpoint metadata is not JSON-serialisable (extra?): {exc}") from None
    return trees, meta


def _seal(folder: Path, meta: dict) -> None:
    """Write ``folder/caliper_checkpoint.json`` with the sha256 of every other file in ``folder``,
    atomically (temporary file + rename): the checkpoint counts as complete once it exists."""
    files = sorted(f for f in folder.rglob("*") if f.is_file() and f.name != META_NAME)
    meta = {**meta, "files": {f.relative_to(folder).as_posix(): _sha256(f) for f in files}}
    tmp = folder / f".{META_NAME}.{uuid.uuid4().hex[:8]}"
    tmp.write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, folder / META_NAME)


def save_checkpoint(path, *, model, config, train_config, features: FeatureLayout, normalizer: Normalizer,
                    fingerprint: str | None, step: int = 0, opt_state=None, ema_state=None, rng=None,
                    extra: dict | None = None, overwrite: bool = False) -> Path:
    """Write a checkpoint folder at ``path`` (atomically; see the module docstring) and return it.
    ``opt_state``/``ema_state``: any array pytrees (an optax state, a params dict); ``rng``: a JAX
    key; ``extra``: JSON-able. An existing ``path`` is an error unless ``overwrite`` (and it must
    then be a checkpoint or an empty folder)."""
    import orbax.checkpoint as ocp

    path = Path(path).absolute()
    if path.exists():
        if not overwrite:
            raise CaliperError(f"{path}: already exists (pass overwrite=True to replace it)")
        if not path.is_dir() or not ((path / META_NAME).is_file() or not any(path.iterdir())):
            raise CaliperError(f"{path}: exists and is not a caliper checkpoint; refusing to replace it")
    trees, meta = _checkpoint_meta(model=model, config=config, train_config=train_config, features=features,
                                   normalizer=normalizer, fingerprint=fingerprint, step=step,
                                   opt_state=opt_state, ema_state=ema_state, rng=rng, extra=extra)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.caliper-tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        tmp.mkdir()
        with _checkpointer(ocp) as ckptr:
            for name, tree in trees.items():
                ckptr.save(tmp / name, tree)
            ckptr.wait_until_finished()
        _seal(tmp, meta)
        if path.exists():
            from caliper_jax.dataset.atomic import OLD_SUFFIX, swap_in

            # a crashed earlier swap's leftover would block the rename
            shutil.rmtree(path.with_name(f".{path.name}{OLD_SUFFIX}"), ignore_errors=True)
            swap_in(path, tmp)
        else:
            os.rename(tmp, path)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return path


def save_run_checkpoint(root, step: int, *, keep: int | None, model, config, train_config,
                        features: FeatureLayout, normalizer: Normalizer, fingerprint: str | None,
                        opt_state=None, ema_state=None, rng=None, extra: dict | None = None) -> Path:
    """Write checkpoint ``root/step_<8 digits>`` of a training run through orbax's
    ``CheckpointManager``, which keeps the newest ``keep`` step folders (``None`` or 0: all) and
    writes each into a temporary folder committed by rename; the caliper metadata with the sha256 of
    every file is written last (:func:`_seal`), so a folder without it is an interrupted save that
    :func:`resolve_checkpoint` passes over. A step saved again (a resumed run) replaces the old one.
    Returns the folder; it loads with :func:`load_checkpoint` like any checkpoint."""
    import orbax.checkpoint as ocp

    root = Path(root).absolute()
    trees, meta = _checkpoint_meta(model=model, config=config, train_config=train_config, features=features,
                                   normalizer=normalizer, fingerprint=fingerprint, step=step,
                                   opt_state=opt_state, ema_state=ema_state, rng=rng, extra=extra)
    root.mkdir(parents=True, exist_ok=True)       # orbax will not create it in a multi-process run
    options = ocp.CheckpointManagerOptions(
        max_to_keep=int(keep) if keep and keep > 0 else None, step_prefix=CHECKPOINT_PREFIX.rstrip("_"),
        step_format_fixed_length=8, enable_async_checkpointing=False, create=False,
        **_multiprocessing(ocp))
    with ocp.CheckpointManager(root, item_names=tuple(trees), options=options) as manager:
        if int(step) in manager.all_steps():
            manager.delete(int(step))
        items = {n: ocp.args.StandardSave(t) for n, t in trees.items()}
        manager.save(int(step), args=ocp.args.Composite(**items), force=True)
        manager.wait_until_finished()
    path = root / f"{CHECKPOINT_PREFIX}{int(step):08d}"
    if not path.is_dir():
        raise CaliperError(f"{path}: orbax did not write the checkpoint folder")
    _seal(path, meta)
    return path


def _multiprocessing(ocp) -> dict:
    """Options of an orbax checkpointer local to this process in a multi-process run
    (jax.distributed): process 0 alone writes a checkpoint (from host copies of the replicated
    state) and each process reads it by itself, so no orbax barrier waits on processes that do not
    take part. Empty in a single-process run."""
    import jax

    if jax.process_count() == 1:
        return {}
    i = jax.process_index()
    return {"multiprocessing_options": ocp.options.MultiprocessingOptions(
        primary_host=i, active_processes={i}, barrier_sync_key_prefix=f"caliper-process-{i}")}


def _checkpointer(ocp):
    """An orbax checkpointer (local to this process in a multi-process run: :func:`_multiprocessing`)."""
    return ocp.StandardCheckpointer(**_multiprocessing(ocp))


# -- load -----------------------------------------------------------------------------------------
@dataclass
class Checkpoint:
    """A loaded checkpoint: the rebuilt policy and the training state saved with it."""

    policy: TrainedPolicy
    train_config: object          # learn.config.TrainConfig or None
    step: int
    opt_state: object             # as opt_template (nested dicts/lists without one), or None
    ema_state: object             # likewise
    rng: object                   # the saved JAX key, or None
    fingerprint: str | None
    extra: dict | None
    path: Path


def _refuse_pickles(path: Path) -> None:
    for p in sorted(path.rglob("*")):
        if p.suffix.lower() in PICKLE_SUFFIXES:
            raise CaliperError(f"{path}: holds {p.relative_to(path)}, a pickle-format file; refusing to load "
                               f"(pickles execute code when loaded); remove it if it is not needed")


def read_checkpoint_meta(path) -> dict:
    """The validated ``caliper_checkpoint.json`` of checkpoint ``path`` (no arrays are read)."""
    path = Path(path)
    if not path.is_dir():
        raise CaliperError(f"{path}: no checkpoint folder there")
    _refuse_pickles(path)
    meta_path = path / META_NAME
    if not meta_path.is_file():
        raise CaliperError(f"{path}: not a caliper checkpoint (no {META_NAME}; an interrupted save?)")
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise CaliperError(f"{meta_path}: corrupt checkpoint metadata ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CaliperError(f"{meta_path}: not a caliper policy checkpoint (format {meta.get('format')!r})"
                           if isinstance(meta, dict) else f"{meta_path}: not a JSON object")
    if meta.get("format_version") != FORMAT_VERSION:
        raise CaliperError(f"{meta_path}: unknown checkpoint format version {meta.get('format_version')!r} "
                           f"(this caliper reads version {FORMAT_VERSION})")
    need = ("config", "features", "normalizer", "step", "arrays")
    missing = [k for k in need if k not in meta]
    if missing or "params" not in meta.get("arrays", {}):
        raise CaliperError(f"{meta_path}: corrupt checkpoint metadata (missing "
                           f"{missing or ['arrays.params']})")
    return meta


def _restore(ckptr, directory: Path, template, where: Path):
    if not directory.is_dir():
        raise CaliperError(f"{directory}: missing (corrupt checkpoint {where})")
    try:
        return ckptr.restore(directory) if template is None else ckptr.restore(directory, template)
    except Exception as exc:  # noqa: BLE001 -- orbax/tensorstore raise many types
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise CaliperError(f"{directory}: unreadable checkpoint arrays ({type(exc).__name__}: "
                           f"{first})") from None


def load_checkpoint(path, *, expect_fingerprint: str | None = None,
                    expect_features: FeatureLayout | None = None, opt_template=None, ema_template=None,
                    builder=None) -> Checkpoint:
    """Load checkpoint ``path`` -- a checkpoint folder, or a training run's folder (its newest
    ``step_*`` checkpoint, as every CLI verb takes it): the policy rebuilt with
    ``builder(config, obs_dim, action_dim)`` (default :func:`learn.policies.build_policy`) and its
    saved state; ``opt_state``/``ema_state``
    restored into the structure of ``opt_template``/``ema_template`` when given. Refuses (one-line
    CaliperError) a fingerprint other than ``expect_fingerprint``, features other than
    ``expect_features``, pickle files, missing/corrupt files and unknown format versions."""
    import orbax.checkpoint as ocp

    path = Path(path)
    if path.is_dir() and not (path / META_NAME).exists() and any(path.glob(f"{CHECKPOINT_PREFIX}*")):
        path = resolve_checkpoint(path)           # a run folder: its newest checkpoint
    path = path.absolute()
    meta = read_checkpoint_meta(path)
    fp = meta.get("fingerprint")
    if expect_fingerprint is not None and fp != expect_fingerprint:
        raise CaliperError(f"{path}: trained on dataset {(fp or 'unknown')[:8]} but this is "
                           f"{expect_fingerprint[:8]} (a different or edited dataset); retrain, or load "
                           f"without the dataset check")
    try:
        features = FeatureLayout.from_dict(meta["features"])
        normalizer = Normalizer.from_dict(meta["normalizer"])
    except (KeyError, TypeError, ValueError) as exc:
        raise CaliperError(f"{path / META_NAME}: corrupt features/normaliser ({exc})") from None
    if expect_features is not None:
        diff = features.mismatch(expect_features)
        if diff is not None:
            raise CaliperError(f"{path}: trained on other features ({diff}, checkpoint vs expected)")
    config = config_from_dict(meta["config"], f"{path / META_NAME}: config")
    train_config = None if meta.get("train_config") is None else \
        train_config_from_dict(meta["train_config"], f"{path / META_NAME}: train_config")
    if builder is None:
        from learn.policies import build_policy

        model = build_policy(config, features.obs_dim, features.action_dim, image_shape=features.image_shape)
    else:
        model = builder(config, features.obs_dim, features.action_dim)
    template = model_params(model)
    try:
        arrays = {name: {k: [shape, dtype] for k, shape, dtype in rows}
                  for name, rows in meta["arrays"].items()}
    except (AttributeError, TypeError, ValueError) as exc:
        raise CaliperError(f"{path / META_NAME}: corrupt array list ({exc})") from None
    _check_like(arrays["params"], template, "params", path)
    for name, tmpl in (("opt_state", opt_template), ("ema_state", ema_template)):
        if tmpl is not None and name not in arrays:
            raise CaliperError(f"{path}: no {name} saved")
        if tmpl is not None:
            _check_leaves(arrays[name], tmpl, name, path)
    _verify_files(path, meta)
    with _checkpointer(ocp) as ckptr:
        params = _restore(ckptr, path / "params", template, path)
        opt_state = _restore(ckptr, path / "opt_state", opt_template, path) if "opt_state" in arrays else None
        ema_state = _restore(ckptr, path / "ema_state", ema_template, path) if "ema_state" in arrays else None
    set_model_params(model, params)
    policy = TrainedPolicy(model, config, features, normalizer, fp)
    try:
        rng = _rng_from_json(meta.get("rng"))
    except (KeyError, TypeError, ValueError) as exc:
        raise CaliperError(f"{path / META_NAME}: corrupt rng ({exc})") from None
    return Checkpoint(policy, train_config, int(meta["step"]), opt_state, ema_state, rng, fp,
                      meta.get("extra"), path)


# -- safetensors ----------------------------------------------------------------------------------
def export_safetensors(policy_or_model, path, metadata: dict | None = None) -> Path:
    """Write the model's parameters (:func:`model_params`, flat ``a.b.c`` names) to ``path`` as
    safetensors. A :class:`TrainedPolicy` also records its config, features, normaliser and
    fingerprint; ``metadata`` adds entries (non-string values stored as JSON). Atomic."""
    import safetensors.numpy

    from caliper_jax.dataset.atomic import write_atomic

    meta = {"format": SAFETENSORS_FORMAT, "format_version": str(FORMAT_VERSION)}
    model = policy_or_model
    if isinstance(policy_or_model, TrainedPolicy):
        p = policy_or_model
        model = p.model
        meta.update({"config": json.dumps(config_to_dict(p.config)),
                     "features": json.dumps(p.features.to_dict()),
                     "normalizer": json.dumps(p.normalizer.to_dict()),
                     "fingerprint": json.dumps(p.fingerprint)})
    for k, v in (metadata or {}).items():
        meta[str(k)] = v if isinstance(v, str) else json.dumps(v)
    tensors = {k: np.ascontiguousarray(np.asarray(v)) for k, v in flatten_tree(model_params(model)).items()}
    path = Path(path)
    write_atomic(path, safetensors.numpy.save(tensors, metadata=meta))
    return path


def _read_safetensors(path):
    import safetensors.numpy

    path = Path(path)
    if not path.is_file():
        raise CaliperError(f"{path}: no such safetensors file")
    data = path.read_bytes()
    try:
        tensors = safetensors.numpy.load(data)
        n = int.from_bytes(data[:8], "little")
        meta = json.loads(data[8:8 + n]).get("__metadata__", {}) or {}
    except Exception as exc:  # noqa: BLE001 -- safetensors raises its own error types
        raise CaliperError(f"{path}: not a readable safetensors file ({exc})") from None
    return tensors, meta


def safetensors_metadata(path) -> dict:
    """The string metadata of safetensors file ``path``."""
    return _read_safetensors(path)[1]


def import_safetensors(path, model):
    """Load :func:`export_safetensors` weights into ``model`` (in place; returns it). Every model
    tensor must be present with the same shape and dtype (the error names the tensor)."""
    import jax

    tensors, _ = _read_safetensors(path)
    template = model_params(model)
    _check_like({k: [list(v.shape), str(v.dtype)] for k, v in tensors.items()}, template, "tensors", path)
    leaves = [tensors[k] for k in flatten_tree(template)]  # flatten order == tree_leaves order
    params = jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(template), leaves)
    return set_model_params(model, params)


def load_safetensors_policy(path, builder=None) -> TrainedPolicy:
    """A :class:`TrainedPolicy` from an :func:`export_safetensors` file of a TrainedPolicy."""
    _, meta = _read_safetensors(path)
    if meta.get("format") != SAFETENSORS_FORMAT or "config" not in meta:
        raise CaliperError(f"{path}: not a caliper policy weights file (no config metadata)")
    try:
        config = config_from_dict(json.loads(meta["config"]), f"{path}: config")
        features = FeatureLayout.from_dict(json.loads(meta["features"]))
        normalizer = Normalizer.from_dict(json.loads(meta["normalizer"]))
        fingerprint = json.loads(meta.get("fingerprint", "null"))
    except (KeyError, TypeError, ValueError) as exc:
        raise CaliperError(f"{path}: corrupt policy metadata ({exc})") from None
    if builder is None:
        from learn.policies import build_policy

        module = build_policy(config, features.obs_dim, features.action_dim, image_shape=features.image_shape)
    else:
        module = builder(config, features.obs_dim, features.action_dim)
    model = import_safetensors(path, module)
    return TrainedPolicy(model, config, features, normalizer, fingerprint)



#: Name prefix of the periodic checkpoints a training run writes into its folder.
CHECKPOINT_PREFIX = "step_"


def resolve_checkpoint(path) -> Path:
    """``path`` itself when it is a checkpoint, else the newest ``step_*`` checkpoint in it (a
    training run's folder)."""
    path = Path(path)
    if (path / META_NAME).is_file():
        return path
    if not path.is_dir():
        raise CaliperError(f"{path}: no such checkpoint (not a folder)")
    found = sorted(p for p in path.glob(f"{CHECKPOINT_PREFIX}*") if (p / META_NAME).is_file())
    if not found:
        raise CaliperError(f"{path}: no checkpoint there (no {META_NAME}, no {CHECKPOINT_PREFIX}* folders)")
    return found[-1]


__all__ = ["CHECKPOINT_PREFIX", "Checkpoint", "FORMAT_VERSION", "META_NAME", "dataset_fingerprint",
           "export_safetensors", "flatten_tree", "import_safetensors", "load_checkpoint",
           "load_safetensors_policy", "model_params", "read_checkpoint_meta", "resolve_checkpoint",
           "safetensors_metadata", "save_checkpoint", "save_run_checkpoint", "set_model_params"]
