"""MP4 video features as lerobot 0.4.4 writes them, through PyAV (imported only when used).

Encoding: libsvtav1, yuv420p, GOP 2 (a keyframe every second frame), crf 30, preset 12, stream rate
fps and frame k at PTS k/fps (the MP4 muxer stores it as k * 2^m in a 1/(fps * 2^m) time base).
Episodes share a file by stream copy (no re-encode): each episode's packets follow the previous
ones, shifted by the file's duration so far, and the episode's ``from_timestamp`` is that shift.
Decoding seeks to the keyframe at or before ``from_timestamp`` and decodes forward, choosing each
frame by its PTS within lerobot's tolerance (``TOLERANCE_S`` = 1e-4 s).
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np

from caliper_jax.errors import CaliperError

CODEC = "libsvtav1"
PIX_FMT = "yuv420p"
GOP = 2
CRF = 30
PRESET = 12
TOLERANCE_S = 1e-4
# SVT-AV1 (the FFmpeg build in PyAV 15) dies with SIGFPE/SIGSEGV on frames narrower than 25 px or
# very wide and flat; 32 px per side is the smallest size measured safe at every aspect ratio.
MIN_SIDE = 32
MAX_SIDE = 16384


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
            'video features need PyAV: pip install "caliper-jax[video]" (or pass caller-encoded MP4s '
            "with save_episode(videos={key: path}); they are then kept one file per episode)"
        ) from None
    return av


def check_size(height: int, width: int, where: str) -> None:
    """Raise CaliperError unless libsvtav1 can encode frames of ``height`` x ``width`` pixels."""
    if not (MIN_SIDE <= height <= MAX_SIDE and MIN_SIDE <= width <= MAX_SIDE):
        raise CaliperError(
            f"{where}: video frames of {height}x{width} px cannot be encoded with {CODEC} (lerobot's codec); "
            f"height and width must be {MIN_SIDE}..{MAX_SIDE} (declare smaller cameras as dtype 'image')"
        )


def encode(frames: list[np.ndarray], path: Path, fps: int) -> None:
    """Encode uint8 (H, W, 3) RGB frames to one MP4 with lerobot's codec settings; frame k at PTS k/fps."""
    av = _av()
    if CODEC not in av.codecs_available:
        raise CaliperError(f"this PyAV build lacks the {CODEC} encoder that lerobot datasets use")
    h, w = frames[0].shape[:2]
    check_size(h, w, str(path))
    options = {"g": str(GOP), "crf": str(CRF), "preset": str(PRESET)}
    from caliper_jax import notices

    with notices.native_stderr(), av.open(str(path), "w", format="mp4") as out:   # SVT-AV1's log: counted
        stream = out.add_stream(CODEC, rate=fps, options=options)
        stream.width, stream.height, stream.pix_fmt = w, h, PIX_FMT
        stream.time_base = Fraction(1, fps)
        for k, pixels in enumerate(frames):
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(pixels), format="rgb24")
            frame.pts = k
            out.mux(stream.encode(frame))
        out.mux(stream.encode())



def probe(path: Path) -> dict:
    """{frames, duration_s, width, height, codec, pix_fmt, fps, time_base} of the first video stream."""
    av = _av()
    try:
        with av.open(str(path)) as container:
            if not container.streams.video:
                raise CaliperError(f"{path}: no video stream")
            s = container.streams.video[0]
            if s.duration is not None:
                duration = Fraction(s.duration) * s.time_base
            else:
                duration = Fraction(container.duration or 0, av.time_base)
            return {
                "frames": int(s.frames),
                "duration": duration,
                "duration_s": float(duration),
                "width": s.width,
                "height": s.height,
                "codec": s.codec_context.codec.canonical_name,
                "pix_fmt": s.pix_fmt,
                "fps": int(s.base_rate) if s.base_rate else None,
                "time_base": s.time_base,
                "has_audio": bool(container.streams.audio),
            }
    except av.error.FFmpegError as exc:
        raise CaliperError(f"{path}: not a readable MP4: {exc}") from None


def stream_info(path: Path, feature: dict, fps: int) -> dict:
    """The ``features[key]["info"]`` block lerobot keeps for a video (probed when PyAV is present)."""
    h, w, c = feature["shape"]
    info = {
        "video.height": h,
        "video.width": w,
        "video.codec": None,
        "video.pix_fmt": PIX_FMT,
        "video.is_depth_map": False,
        "video.fps": fps,
        "video.channels": c,
        "has_audio": False,
    }
    if not have_pyav():
        return info
    p = probe(path)
    info.update(
        {
            "video.height": p["height"],
            "video.width": p["width"],
            "video.codec": p["codec"],
            "video.pix_fmt": p["pix_fmt"],
            "video.fps": p["fps"] or fps,
            "has_audio": p["has_audio"],
        }
    )
    return info


def concatenate(paths: list[Path], out_path: Path) -> list[tuple[float, float]]:
    """Stream-copy the MP4s ``paths`` into one file; return each input's (from_s, to_s) in it.

    Every input's packets are shifted by the summed durations of the inputs before it (what
    FFmpeg's concat demuxer, used by lerobot, does); the moov atom goes first (faststart).
    """
    av = _av()
    spans = []
    try:
        with av.open(str(out_path), "w", format="mp4", options={"movflags": "faststart"}) as out:
            ostream, offset = None, Fraction(0)
            for path in paths:
                with av.open(str(path)) as src:
                    istream = src.streams.video[0]
                    if ostream is None:
                        ostream = _stream_like(out, istream)
                    tb_in, tb_out = istream.time_base, ostream.time_base
                    duration = Fraction(istream.duration or 0) * tb_in
                    shift = round(offset / tb_out)
                    for packet in src.demux(istream):
                        if packet.dts is None:  # demuxer flush packet
                            continue
                        for field in ("pts", "dts", "duration"):
                            value = getattr(packet, field)
                            if value is not None:
                                scaled = round(Fraction(value) * tb_in / tb_out)
                                setattr(packet, field, scaled + (shift if field != "duration" else 0))
                        packet.stream = ostream
                        out.mux(packet)
                spans.append((float(offset), float(offset + duration)))
                offset += duration
    except av.error.FFmpegError as exc:
        raise CaliperError(f"{out_path}: concatenating {len(paths)} episode videos failed: {exc}") from None
    return spans


def _stream_like(out, istream):
    if hasattr(out, "add_stream_from_template"):  # PyAV >= 14
        ostream = out.add_stream_from_template(template=istream, opaque=True)
    else:  # pragma: no cover - PyAV 12/13
        ostream = out.add_stream(template=istream)
    ostream.time_base = istream.time_base
    return ostream


def decode(
    path: Path,
    start_s: float,
    count: int,
    fps: int,
    tolerance_s: float = TOLERANCE_S,
    trace: list | None = None,
) -> np.ndarray:
    """Frames at ``start_s + k / fps`` for k < ``count``: uint8 (count, H, W, 3).

    Seeks to the keyframe at or before ``start_s`` and decodes forward; each decoded frame goes to
    the slot its PTS names, within ``tolerance_s``. ``trace``, if given, receives the PTS (seconds)
    of every frame decoded, for tests and benchmarks.
    """
    av = _av()
    frames: list = [None] * count
    filled = 0
    try:
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            tb = stream.time_base
            container.seek(max(0, int(Fraction(start_s) / tb)), stream=stream, backward=True)
            for frame in container.decode(stream):
                if frame.pts is None:
                    raise CaliperError(f"{path}: a decoded frame has no PTS")
                t = float(frame.pts * tb)
                if trace is not None:
                    trace.append(t)
                k = round((t - start_s) * fps)
                if k < 0:
                    continue
                if k >= count:
                    break
                if abs(t - (start_s + k / fps)) >= tolerance_s:
                    raise CaliperError(
                        f"{path}: frame at {t:.6f}s is {abs(t - start_s - k / fps):.2e}s off the "
                        f"{fps} fps grid from {start_s:.6f}s (tolerance {tolerance_s}s)"
                    )
                if frames[k] is None:
                    filled += 1
                frames[k] = frame.to_ndarray(format="rgb24")
                if filled == count:
                    break
    except av.error.FFmpegError as exc:
        raise CaliperError(f"{path}: undecodable video: {exc}") from None
    if filled != count:
        missing = [k for k, f in enumerate(frames) if f is None]
        raise CaliperError(
            f"{path}: holds {filled} of the {count} frames from {start_s:.6f}s "
            f"(first missing: frame {missing[0]} at {start_s + missing[0] / fps:.6f}s)"
        )
    return np.stack(frames)
