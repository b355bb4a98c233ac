"""Optional MP4 support through PyAV: encode an episode's frames, probe stream info, decode frames.

PyAV is imported only when a video feature is used; without it the writer needs caller-supplied
MP4s and the reader / doctor cannot decode (they say so).
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np

from caliper_jax.errors import CaliperError

CODECS = ("libsvtav1", "libx264", "h264", "mpeg4")


def have_pyav() -> bool:
    try:
        import av  # noqa: F401
    except ImportError:
        return False
    return True


def _av():
    try:
        import av
    except ImportError:
        raise CaliperError(
            'video features need PyAV (pip install "caliper-jax[video]") or caller-supplied MP4s '
            "(save_episode(videos={key: path}))"
        ) from None
    return av


def encode(frames: list[np.ndarray], path: Path, fps: int) -> None:
    """Encode uint8 HxWx3 frames as yuv420p MP4 with PTS k/fps (lerobot's g=2, crf=30 settings)."""
    av = _av()
    codec = next((c for c in CODECS if c in av.codecs_available), None)
    if codec is None:
        raise CaliperError("PyAV has no usable video encoder (tried " + ", ".join(CODECS) + ")")
    options = {"g": "2", "crf": "30"} if codec in ("libsvtav1", "libx264") else {}
    h, w = frames[0].shape[:2]
    with av.open(str(path), "w", format="mp4") as out:
        stream = out.add_stream(codec, rate=fps, options=options)
        stream.width, stream.height, stream.pix_fmt = w, h, "yuv420p"
        stream.time_base = Fraction(1, fps)
        for k, pixels in enumerate(frames):
            frame = av.VideoFrame.from_ndarray(pixels, format="rgb24")
            frame.pts = k
            out.mux(stream.encode(frame))
        out.mux(stream.encode())


def stream_info(path: Path, feature: dict, fps: int) -> dict:
    """The info block lerobot keeps for a video feature; probed with PyAV when available."""
    h, w, c = feature["shape"]
    info = {
        "video.height": h,
        "video.width": w,
        "video.codec": None,
        "video.pix_fmt": "yuv420p",
        "video.is_depth_map": False,
        "video.fps": fps,
        "video.channels": c,
        "has_audio": False,
    }
    try:
        import av
    except ImportError:
        return info
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        info.update(
            {
                "video.height": stream.height,
                "video.width": stream.width,
                "video.codec": stream.codec_context.codec.canonical_name,
                "video.pix_fmt": stream.pix_fmt,
                "has_audio": bool(container.streams.audio),
            }
        )
    return info


def decode(path: Path, start_s: float, count: int, fps: int) -> np.ndarray:
    """Decode ``count`` frames starting at ``start_s`` seconds: uint8 (count, H, W, 3)."""
    av = _av()
    frames = []
    try:
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            for frame in container.decode(stream):
                t = float(frame.pts * stream.time_base) if frame.pts is not None else len(frames) / fps
                if t + 0.5 / fps < start_s:
                    continue
                frames.append(frame.to_ndarray(format="rgb24"))
                if len(frames) == count:
                    break
    except av.error.FFmpegError as exc:
        raise CaliperError(f"{path}: undecodable video: {exc}") from None
    if len(frames) != count:
        raise CaliperError(f"{path}: holds {len(frames)} frames from {start_s:.3f}s, expected {count}")
    return np.stack(frames)
