"""Minimal PNG codec (8-bit gray/RGB/RGBA) on zlib + NumPy, used when Pillow is not installed.

Encoding is deterministic (filter type 0 on every row, zlib level 6), so identical pixels give
identical bytes. Decoding handles all five row filters; Pillow is preferred when importable.
"""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np

from caliper_jax.errors import CaliperError

SIGNATURE = b"\x89PNG\r\n\x1a\n"
_CHANNELS = {0: 1, 2: 3, 4: 2, 6: 4}


def _chunk(kind: bytes, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))


def encode_png(pixels: np.ndarray) -> bytes:
    """Encode a uint8 HxWx3 array as PNG bytes."""
    h, w, c = pixels.shape
    raw = np.zeros((h, 1 + w * c), dtype=np.uint8)
    raw[:, 1:] = np.ascontiguousarray(pixels, dtype=np.uint8).reshape(h, w * c)
    header = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return (
        SIGNATURE
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(raw.tobytes(), 6))
        + _chunk(b"IEND", b"")
    )


def _unfilter(data: bytes, h: int, stride: int, bpp: int) -> np.ndarray:
    rows = np.frombuffer(data, dtype=np.uint8).reshape(h, stride + 1)
    out = np.zeros((h, stride), dtype=np.uint8)
    prev = np.zeros(stride, dtype=np.uint8)
    for y in range(h):
        kind, line = rows[y, 0], rows[y, 1:]
        if kind == 0:
            cur = line.copy()
        elif kind == 1:
            cur = line.reshape(-1, bpp).cumsum(axis=0, dtype=np.uint8).reshape(-1)
        elif kind == 2:
            cur = line + prev
        elif kind in (3, 4):
            cur = _unfilter_sequential(line, prev, bpp, kind)
        else:
            raise CaliperError(f"PNG: unknown row filter {kind}")
        out[y] = cur
        prev = cur
    return out


def _unfilter_sequential(line: np.ndarray, prev: np.ndarray, bpp: int, kind: int) -> np.ndarray:
    cur = [0] * len(line)
    up = prev.tolist()
    src = line.tolist()
    for i, x in enumerate(src):
        a = cur[i - bpp] if i >= bpp else 0
        b = up[i]
        if kind == 3:
            pred = (a + b) >> 1
        else:
            c = up[i - bpp] if i >= bpp else 0
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            pred = a if pa <= pb and pa <= pc else b if pb <= pc else c
        cur[i] = (x + pred) & 0xFF
    return np.array(cur, dtype=np.uint8)


def _parse(data: bytes) -> tuple[tuple, bytes]:
    """Check signature, chunk CRCs and the zlib stream; return (IHDR fields, inflated scanlines)."""
    if not data.startswith(SIGNATURE):
        raise CaliperError("not a PNG (bad signature)")
    pos, idat, header = 8, [], None
    while pos + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        payload = data[pos + 8 : pos + 8 + length]
        crc = data[pos + 8 + length : pos + 12 + length]
        if len(payload) != length or len(crc) != 4:
            raise CaliperError("PNG truncated")
        if struct.unpack(">I", crc)[0] != zlib.crc32(kind + payload):
            raise CaliperError(f"PNG chunk {kind.decode('latin-1')} fails its CRC")
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", payload)
        elif kind == b"IDAT":
            idat.append(payload)
        elif kind == b"IEND":
            break
        pos += 12 + length
    if header is None or not idat:
        raise CaliperError("PNG lacks IHDR or IDAT")
    try:
        raw = zlib.decompress(b"".join(idat))
    except zlib.error as exc:
        raise CaliperError(f"PNG data corrupt: {exc}") from None
    return header, raw


def verify_png(data: bytes) -> None:
    """Raise CaliperError unless ``data`` is a structurally intact PNG (cheap: no unfiltering)."""
    _parse(bytes(data))


def _decode_builtin(data: bytes) -> np.ndarray:
    (w, h, depth, color, _, _, interlace), raw = _parse(data)
    if depth != 8 or color not in _CHANNELS or interlace:
        raise CaliperError(f"PNG variant not supported without Pillow (depth {depth}, color {color}; "
                           'pip install "caliper-jax[video]")')
    c = _CHANNELS[color]
    if len(raw) != h * (w * c + 1):
        raise CaliperError("PNG data has the wrong size")
    pixels = _unfilter(raw, h, w * c, c).reshape(h, w, c)
    if c == 1:
        return np.repeat(pixels, 3, axis=2)
    if c == 2:
        return np.repeat(pixels[:, :, :1], 3, axis=2)
    return np.ascontiguousarray(pixels[:, :, :3])


def decode_png(data: bytes) -> np.ndarray:
    """Decode PNG (or, with Pillow, any image) bytes to uint8 HxWx3; CaliperError if undecodable."""
    try:
        from PIL import Image
    except ImportError:
        return _decode_builtin(bytes(data))
    try:
        with Image.open(io.BytesIO(data)) as img:
            return np.asarray(img.convert("RGB"), dtype=np.uint8)
    except Exception as exc:  # Pillow raises many types for bad bytes
        raise CaliperError(f"undecodable image: {exc}") from None
