"""Camera video of a LeRobot v3 dataset in the Data tab: one ``<video>`` per video feature, labelled
with the feature's name, showing the selected episode's frame.

LeRobot v3 stores many episodes in one MP4 per camera; an episode is the segment
``[from_timestamp, to_timestamp)`` of its file (``videos/KEY/...`` columns of the episode
metadata). The page gets each file once (embedded as a ``data:`` URI: no second web server; a
file over ``MAX_VIDEO_BYTES`` is named instead of shown) and, for each replayed frame, a tiny
script that seeks every camera's video to the frame's instant in the file: ``from_timestamp +
(frame + 0.5) / fps``, the middle of the frame's display interval, so the browser shows exactly
that frame (PTS k / fps within the segment). Playback is the Data tab's player stepping frames,
so the video never drifts from the 3-D replay.
"""

from __future__ import annotations

import base64
import html

from caliper_jax.errors import CaliperError

MAX_VIDEO_BYTES = 32 * 2**20
ELEMENT_ID = "caliper-cam-{}"  # the <video> element id of camera i


def segment(reader, episode: int, key: str) -> tuple[float, float]:
    """(from_timestamp, to_timestamp) s of ``episode`` in the MP4 of video feature ``key``."""
    meta = reader.episode_meta(episode)
    try:
        return float(meta[f"videos/{key}/from_timestamp"]), float(meta[f"videos/{key}/to_timestamp"])
    except KeyError:
        raise CaliperError(
            f"{reader.root}: episode {episode} has no videos/{key}/from_timestamp / to_timestamp"
        ) from None


def frame_time(reader, episode: int, key: str, frame: int) -> float:
    """Seconds into the MP4 of ``key`` at which ``frame`` of ``episode`` is shown: the middle of
    its display interval, clipped into the episode's segment."""
    lo, hi = segment(reader, episode, key)
    t = lo + (int(frame) + 0.5) / float(reader.fps)
    return min(t, max(hi - 0.25 / float(reader.fps), lo))


def video_html(i: int, key: str, data: bytes, t: float) -> str:
    """The labelled ``<video>`` of camera ``i`` (MP4 bytes ``data``), first shown at ``t`` s."""
    label = html.escape(key)
    src = "data:video/mp4;base64," + base64.b64encode(data).decode("ascii")
    return (
        f'<div style="font-size:12px;margin:2px 0">{label}</div>'
        f'<video id="{ELEMENT_ID.format(i)}" aria-label="{label}" title="{label}" muted playsinline '
        f'preload="auto" data-t="{t:.6f}" onloadedmetadata="this.currentTime=+this.dataset.t" '
        f'style="width:100%;display:block;background:#000" src="{src}"></video>'
    )


def seek_html(times: dict) -> str:
    """A hidden image whose ``onerror`` (it runs when this markup is placed in the page) seeks
    each camera ``i`` of ``times`` ({i: seconds}) to its time (or sets it for when its metadata
    arrives)."""
    calls = "".join(
        f"s('{ELEMENT_ID.format(i)}',{t:.6f});" for i, t in sorted(times.items())
    )
    script = (
        "var s=function(id,t){var v=document.getElementById(id);if(!v)return;v.dataset.t=t;"
        "if(v.readyState>0&&Math.abs(v.currentTime-t)>1e-6)v.currentTime=t;};" + calls
    )
    return f'<img alt="" style="display:none" src="data:image/gif;base64,AA==" onerror="{script}">'


class CameraViews:
    """The video features of the open dataset in ``folder`` (a viser GUI folder) of ``gui``.
    ``show(reader, episode, frame)`` follows the replay; ``state()`` is what the page shows."""

    def __init__(self, gui, folder):
        self.gui, self.folder = gui, folder
        self.reader, self.keys = None, []
        self._videos, self._files, self._sync = [], [], None
        self.cameras = []

    def clear(self) -> None:
        for h in self._videos + ([self._sync] if self._sync is not None else []):
            h.remove()
        self._videos, self._files, self._sync, self.cameras = [], [], None, []
        self.reader, self.keys = None, []

    def open(self, reader) -> None:
        """One (empty) view per video feature of ``reader``."""
        from caliper_jax.dataset.format import video_keys

        self.clear()
        self.reader, self.keys = reader, video_keys(reader.features)
        with self.folder:
            for key in self.keys:
                self._videos.append(self.gui.add_html(f"<div>{html.escape(key)}</div>"))
                self._files.append(None)
            if self.keys:
                self._sync = self.gui.add_html(seek_html({}))

    def show(self, episode: int, frame: int) -> None:
        """Every camera at ``frame`` of ``episode``: its file sent when it changed, then seeked."""
        if not self.keys:
            return
        reader, times, cams = self.reader, {}, []
        for i, key in enumerate(self.keys):
            path = reader.video_path(episode, key)
            lo, hi = segment(reader, episode, key)
            t = frame_time(reader, episode, key, frame)
            cam = {"key": key, "file": str(path.relative_to(reader.root)), "from_timestamp": lo,
                   "to_timestamp": hi, "time": t, "error": None}
            if self._files[i] != path:
                self._files[i] = path
                size = path.stat().st_size if path.is_file() else None
                if size is None:
                    cam["error"] = f"{cam['file']}: missing"
                elif size > MAX_VIDEO_BYTES:
                    cam["error"] = (f"{cam['file']}: {size / 2**20:.0f} MB, over the "
                                    f"{MAX_VIDEO_BYTES // 2**20} MB the page embeds")
                if cam["error"] is None:
                    self._videos[i].content = video_html(i, key, path.read_bytes(), t)
                else:
                    self._videos[i].content = f"<div>{html.escape(key)}: {html.escape(cam['error'])}</div>"
            elif self.cameras and self.cameras[i]["error"]:
                cam["error"] = self.cameras[i]["error"]
            times[i] = t
            cams.append(cam)
        self.cameras = cams
        self._sync.content = seek_html(times)

    def state(self) -> list:
        return [dict(c) for c in self.cameras]


__all__ = ["CameraViews", "ELEMENT_ID", "MAX_VIDEO_BYTES", "frame_time", "segment", "seek_html", "video_html"]
