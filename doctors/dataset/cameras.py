"""Per-episode camera checks: D012 dead camera, D013 duplicated frames, D014 brightness drift."""

from __future__ import annotations

import numpy as np

from caliper_jax.dataset.png import decode_png, verify_png
from caliper_jax.errors import CaliperError
from doctors.dataset.findings import DoctorOptions, Finding
from doctors.dataset.rules import finding


def _sample(n: int, k: int) -> np.ndarray:
    return np.unique(np.round(np.linspace(0, n - 1, min(n, k))).astype(int))


def check_stream(key: str, episode: int, frames, encoded: bool, opts: DoctorOptions) -> list[Finding]:
    """``frames``: PNG bytes per frame (``encoded``) or decoded uint8 HxWx3 arrays."""
    n = len(frames)
    if n == 0:
        return []
    if encoded:
        for i, data in enumerate(frames):
            try:
                if data is None:
                    raise CaliperError("no image bytes")
                verify_png(data)
            except CaliperError as exc:
                return [
                    finding(
                        "D012",
                        f"camera {key!r} episode {episode}: frame {i} cannot be decoded ({exc})",
                        severity="Error",
                        episode=episode,
                        frame=i,
                        feature=key,
                    )
                ]
    idx = _sample(n, opts.camera_sample)
    try:
        images = np.stack([decode_png(frames[i]) if encoded else frames[i] for i in idx]) / 255.0
    except CaliperError as exc:
        return [
            finding(
                "D012",
                f"camera {key!r} episode {episode}: frames cannot be decoded ({exc})",
                severity="Error",
                episode=episode,
                feature=key,
            )
        ]
    mean, std = float(images.mean()), float(images.std())
    if std < opts.constant_std:
        kind = "black" if mean < opts.dark_level else "white" if mean > 1 - opts.dark_level else "constant"
        return [
            finding(
                "D012",
                f"camera {key!r} episode {episode}: the stream is {kind} (mean {mean:.3f}, std {std:.4f})",
                episode=episode,
                feature=key,
                value=std,
            )
        ]
    out = []
    if n > 1:
        same = sum(_equal(frames[i], frames[i - 1]) for i in range(1, n)) / (n - 1)
        if same > opts.duplicate_frames:
            out.append(
                finding(
                    "D013",
                    f"camera {key!r} episode {episode}: {same:.0%} of consecutive frames are identical",
                    episode=episode,
                    feature=key,
                    value=same,
                )
            )
    if len(idx) > 2:
        brightness = images.mean(axis=(1, 2, 3))
        slope = np.polyfit(idx.astype(float), brightness, 1)[0]
        drift = float(slope * (n - 1))
        if abs(drift) > opts.brightness_drift:
            out.append(
                finding(
                    "D014",
                    f"camera {key!r} episode {episode}: brightness drifts {drift:+.2f} start to end",
                    episode=episode,
                    feature=key,
                    value=drift,
                )
            )
    return out


def _equal(a, b) -> bool:
    return a == b if isinstance(a, bytes) else bool(np.array_equal(a, b))
