"""The dataset doctor: two streaming passes over a LeRobotDataset v3.0, one episode resident.

Pass 1 gathers exact per-dof moments, lengths, hashes, a seeded reservoir and per-episode checks
(timestamps, frozen tails, non-finite values, cameras, index columns); pass 2 histograms every dof
between the pass-1 bounds and looks for wrap-around jumps. The report is a pure function of the
dataset bytes and the options.
"""

from __future__ import annotations

import hashlib
from contextlib import contextmanager

import numpy as np

from caliper_jax import progress as progress_bar
from caliper_jax.dataset import format as fmt
from caliper_jax.dataset import video
from caliper_jax.dataset.reader import LeRobotReader
from caliper_jax.errors import CaliperError
from doctors.dataset import checks, structure
from doctors.dataset.accumulate import Histogram, Moments, Reservoir
from doctors.dataset.cameras import check_stream
from doctors.dataset.findings import DoctorOptions, Finding
from doctors.dataset.report import Report
from doctors.dataset.rules import finding

INDEX_COLUMNS = ["timestamp", "frame_index", "episode_index", "index", "task_index"]


class _Scan:
    """Accumulators for the vector features of one dataset."""

    def __init__(self, reader: LeRobotReader, opts: DoctorOptions):
        self.opts, self.fps = opts, reader.fps
        self.keys = fmt.vector_keys(reader.features)
        dims = {k: reader.features[k]["shape"][0] for k in self.keys}
        self.moments = {k: Moments(d, 2 <= d <= opts.corridor_max_dim) for k, d in dims.items()}
        self.state = opts.state_key if opts.state_key in dims else None
        self.action = opts.action_key if opts.action_key in dims else None
        self.paired = bool(self.state and self.action)
        self.same_dim = self.paired and dims[self.state] == dims[self.action]
        self.reservoir = Reservoir(opts.reservoir_size, opts.seed)
        self.echo_sq, self.echo_n = 0.0, 0
        self.lengths: dict[int, int] = {}
        self.hashes: dict[int, bytes] = {}
        self.poisoned: set[str] = set()
        self.hists: dict[str, Histogram] = {}
        self.units: dict[str, list[str]] = {}
        self.jumps: dict[str, dict[int, tuple[int, int, float]]] = {k: {} for k in self.keys}

    def pass1(self, ep: int, arrays: dict) -> list[Finding]:
        n = len(arrays["timestamp"])
        self.lengths[ep] = n
        out = self._timestamps(ep, arrays["timestamp"].astype(np.float64))
        finite = {}
        for key in self.keys:
            x = arrays[key].reshape(n, -1).astype(np.float64)
            ok = np.isfinite(x).all(axis=1)
            if not ok.all():
                self.poisoned.add(key)
                bad = int(np.flatnonzero(~ok)[0])
                out.append(
                    finding(
                        "D016",
                        f"{key!r} episode {ep}: {int((~ok).sum())} frame(s) hold NaN/inf, "
                        f"first at frame {bad}",
                        episode=ep,
                        frame=bad,
                        feature=key,
                    )
                )
            self.moments[key].update(x[ok])
            finite[key] = (x, ok)
        out += self._frozen_tail(ep, n, arrays)
        if self.state:
            state = np.ascontiguousarray(arrays[self.state])
            self.hashes[ep] = hashlib.blake2b(state.tobytes() + str(state.shape).encode()).digest()
        if self.paired:
            (s, s_ok), (a, a_ok) = finite[self.state], finite[self.action]
            both = s_ok & a_ok
            self.reservoir.update(np.hstack([s, a])[both], ep, np.flatnonzero(both))
            if self.same_dim:
                d = a[both] - s[both]
                self.echo_sq += float((d * d).sum())
                self.echo_n += d.size
        return out

    def _timestamps(self, ep: int, ts: np.ndarray) -> list[Finding]:
        if not np.isfinite(ts).all():
            bad = int(np.flatnonzero(~np.isfinite(ts))[0])
            return [
                finding(
                    "D016",
                    f"episode {ep}: non-finite timestamp at frame {bad}",
                    episode=ep,
                    frame=bad,
                    feature="timestamp",
                )
            ]
        dt = np.diff(ts)
        period = 1.0 / self.fps
        back = np.flatnonzero(dt <= 0)
        if len(back):  # time standing still or running backwards: frames are misordered, an Error
            i = int(back[0])
            return [
                finding(
                    "D010",
                    f"episode {ep}: timestamps go {'backwards' if dt[i] < 0 else 'nowhere'} at frame "
                    f"{i + 1} ({ts[i]:.6g} s -> {ts[i + 1]:.6g} s; {len(back)} non-increasing step(s))",
                    severity="Error",
                    episode=ep,
                    frame=i + 1,
                    feature="timestamp",
                    value=float(dt[i]),
                )
            ]
        bad = np.flatnonzero(np.abs(dt - period) > self.opts.dt_tolerance * period)
        if len(bad):
            i = int(bad[0])
            return [
                finding(
                    "D010",
                    f"episode {ep}: dt {dt[i]:.4g} s at frame {i + 1} (expected {period:.4g} s; "
                    f"{len(bad)} irregular step(s))",
                    episode=ep,
                    frame=i + 1,
                    feature="timestamp",
                    value=float(dt[i]),
                )
            ]
        return []

    def _frozen_tail(self, ep: int, n: int, arrays: dict) -> list[Finding]:
        if not self.keys or n < self.opts.frozen_tail:
            return []
        rows = np.hstack([np.ascontiguousarray(arrays[k]).reshape(n, -1).view(np.uint8) for k in self.keys])
        same = (rows == rows[-1]).all(axis=1)
        run = n - int(np.flatnonzero(~same)[-1]) - 1 if not same.all() else n
        if run >= self.opts.frozen_tail:
            return [
                finding(
                    "D011",
                    f"episode {ep}: the last {run} frames are bit-identical",
                    episode=ep,
                    frame=n - run,
                    value=float(run),
                )
            ]
        return []

    def start_pass2(self) -> None:
        for key, mom in self.moments.items():
            lo = np.where(mom.n > 0, mom.min, 0.0)
            hi = np.where(mom.n > 0, mom.max, 0.0)
            self.hists[key] = Histogram(lo, hi, self.opts.histogram_bins)
            self.units[key] = checks.infer_units(lo, hi, self.opts.dead_std)

    def pass2(self, ep: int, arrays: dict) -> None:
        for key in self.keys:
            x = arrays[key].reshape(len(arrays[key]), -1).astype(np.float64)
            x = x[np.isfinite(x).all(axis=1)]
            self.hists[key].update(x)
            jumps = np.diff(x, axis=0)
            for j, unit in enumerate(self.units[key]):
                period = checks.wrap_period(unit)
                if period is None or j in self.jumps[key]:
                    continue
                hits = np.flatnonzero(np.abs(jumps[:, j]) >= self.opts.wrap_fraction * period)
                if len(hits):
                    self.jumps[key][j] = (ep, int(hits[0]) + 1, float(jumps[hits[0], j]))

    def findings(self, stored_stats: dict | None, features: dict) -> list[Finding]:
        o = self.opts
        out: list[Finding] = []
        for key in self.keys:
            mom = self.moments[key]
            out += checks.dead_dofs(key, mom, o)
            if key not in self.poisoned:
                out += checks.stale_stats(stored_stats, key, features[key], mom, o)
            out += checks.coverage(key, mom, self.hists[key], o)
            out += checks.corridor(key, mom, o)
            out += checks.wraparound(key, self.jumps[key], self.units[key])
        if self.action:
            out += checks.saturation(self.action, self.moments[self.action], self.hists[self.action], o)
        if self.paired:
            s, a = self.moments[self.state], self.moments[self.action]
            out += checks.tiny_actions(self.action, a, s, o)
            out += checks.contradictions(self.reservoir, len(s.mean), s.std, a.std, o)
            if self.same_dim:
                out += checks.echo(self.action, s, self.echo_sq, self.echo_n, o)
                out += checks.unit_mismatch(self.action, self.units[self.action], a, s, o)
        out += checks.length_outliers(self.lengths, o)
        out += checks.duplicates(self.hashes, o)
        out += checks.short_episodes(self.lengths, o)
        return out

    def summaries(self, features: dict) -> dict:
        out = {}
        for key in self.keys:
            mom = self.moments[key]
            out[key] = {
                "dim": len(mom.mean),
                "names": features[key].get("names"),
                "mean": mom.mean.tolist(),
                "std": mom.std.tolist(),
                "min": mom.min.tolist() if mom.n else [],
                "max": mom.max.tolist() if mom.n else [],
                "bin_occupancy": self.hists[key].occupancy().tolist(),
                "units": self.units[key],
            }
        return out


def diagnose(root, options: DoctorOptions | None = None, progress: bool | None = None) -> Report:
    """Run every check over the dataset at ``root``; raise CaliperError only if it cannot be inspected."""
    opts = options or DoctorOptions()
    reader = LeRobotReader(root)
    features = reader.features
    scan = _Scan(reader, opts)
    images, videos = fmt.image_keys(features), fmt.video_keys(features)
    decode_videos = bool(videos) and video.have_pyav()
    findings = structure.check_dataset(reader)
    if videos and not decode_videos:
        findings += [
            finding("D021", f"video feature {k!r} not checked: PyAV is not installed", feature=k)
            for k in videos
        ]
    bar = progress_bar.bar(2 * reader.num_episodes, "doctor", unit="ep", enabled=progress)
    readable = []
    for ep in range(reader.num_episodes):
        try:
            arrays = reader.episode(ep, scan.keys + INDEX_COLUMNS + images, decode_images=False)
        except CaliperError as exc:
            findings.append(finding("D019", f"episode {ep}: {exc}", episode=ep))
            bar.update(2)
            continue
        readable.append(ep)
        findings += structure.check_episode(reader, ep, arrays)
        findings += scan.pass1(ep, arrays)
        for key in images:
            findings += check_stream(key, ep, arrays[key], True, opts)
        for key in videos if decode_videos else []:
            findings += _video_checks(reader, ep, key, opts)
        bar.update()
    scan.start_pass2()
    for ep in readable:
        scan.pass2(ep, reader.episode(ep, scan.keys))
        bar.update()
    bar.close()
    findings += scan.findings(reader.stats, features)
    findings = [f for f in findings if f.code not in opts.skip]
    return Report(
        dataset=str(reader.root),
        episodes=reader.num_episodes,
        frames=reader.num_frames,
        fps=reader.fps,
        findings=findings,
        summaries=scan.summaries(features),
    )


def _video_checks(reader: LeRobotReader, ep: int, key: str, opts: DoctorOptions) -> list[Finding]:
    try:
        frames = reader.video_frames(ep, key)
    except CaliperError as exc:
        return [
            finding("D012", f"camera {key!r} episode {ep}: {exc}", severity="Error", episode=ep, feature=key)
        ]
    return check_stream(key, ep, list(frames), False, opts)


class DatasetNotReady(CaliperError):
    """Raised by ``guard`` when the dataset has Error findings; ``.report`` holds the full report."""

    def __init__(self, message: str, report: Report):
        super().__init__(message)
        self.report = report


@contextmanager
def guard(root, options: DoctorOptions | None = None, allow=()):
    """``with guard(root): train(...)`` -- diagnose first, raise DatasetNotReady on Error findings."""
    report = diagnose(root, options)
    errors = [f for f in report.findings if f.severity == "Error" and f.code not in set(allow)]
    if errors:
        codes = ", ".join(sorted({f.code for f in errors}))
        raise DatasetNotReady(
            f"{root}: {len(errors)} Error finding(s) ({codes}) - fix before training; first: "
            f"{errors[0].message}",
            report,
        )
    yield report
