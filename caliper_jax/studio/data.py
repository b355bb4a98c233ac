"""Data panel: open a LeRobot v3 dataset, list its episodes, plot one feature of one episode, run
the dataset doctor and jump to each finding's episode and frame; an episode's
``observation.state`` replays on the robot when its width matches the robot's coordinates, frame
by frame or played at the dataset's fps (a background thread), and each camera's video (video
features) beside it at the replayed frame (:mod:`caliper_jax.studio.cameras`). Engine calls only:
:class:`caliper_jax.dataset.LeRobotReader`, :func:`doctors.dataset.diagnose`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from caliper_jax.errors import CaliperError

MAX_TABLE_ROWS = 50
MAX_FINDING_BUTTONS = 25
MAX_LABEL = 160  # characters of a finding's button label
STATE_KEY = "observation.state"
ENV_KEY = "observation.environment_state"


def finding_label(f, width: int = MAX_LABEL) -> str:
    """One doctor finding as a button label: code, severity, where (episode / frame) and message
    (cut to ``width`` characters), e.g. ``D015 Warning ep 3 frame 0: episode 3 repeats ...``."""
    where = "" if f.episode is None else f" ep {f.episode}" + ("" if f.frame is None else f" frame {f.frame}")
    text = f"{f.code} {f.severity}{where}: {f.message}"
    return text if len(text) <= width else text[: width - 3] + "..."


class DataPanel:
    """The Data tab. Python API: ``open(root)``, ``select(episode, frame, feature, dim)``,
    ``run_doctor()``, ``jump(i)`` (to finding i), ``play()`` / ``pause()`` (the selected episode
    at the dataset's fps)."""

    def __init__(self, app, tab, dataset=None):
        self.app, self.tab = app, tab
        self.reader = None
        self.report = None
        self.episode = self.frame = 0
        self.feature, self.dim = None, 0
        self.jumped = None
        self._buttons = []
        self._syncing = False
        self._states = None  # (episode, its observation.state rows) for replay
        self._env = None  # (episode, its observation.environment_state rows)
        self.props, self._statics, self._objects_of, self.prop_poses = {}, [], None, None
        from caliper_jax.studio.motion import Player

        self.player = Player(self._seek)
        gui = app.server.gui
        with tab:
            self.root = gui.add_text("Dataset folder", "" if dataset is None else str(dataset))
            gui.add_button("Open dataset").on_click(self._gui(lambda: self.open(self.root.value)))
            self.summary = gui.add_markdown("No dataset open.")
            self.ep_in = gui.add_number("Episode", 0, min=0, step=1)
            self.ep_in.on_update(
                self._gui(
                    lambda: None if self._syncing else self.select(episode=int(self.ep_in.value), frame=0)
                )
            )
            self.feat_in = gui.add_dropdown("Feature", ("-",))
            self.feat_in.on_update(
                self._gui(lambda: None if self._syncing else self.select(feature=self.feat_in.value))
            )
            self.dim_in = gui.add_number("Dimension", 0, min=0, step=1)
            self.dim_in.on_update(
                self._gui(lambda: None if self._syncing else self.select(dim=int(self.dim_in.value)))
            )
            self.frame_in = gui.add_slider("Frame", min=0, max=1, step=1, initial_value=0)
            self.frame_in.on_update(
                self._gui(lambda: None if self._syncing else self.select(frame=int(self.frame_in.value)))
            )
            gui.add_button("Play / Pause episode").on_click(
                self._gui(lambda: self.pause() if self.playing else self.play())
            )
            from caliper_jax.studio.cameras import CameraViews

            self.cameras = CameraViews(gui, gui.add_folder("Cameras"))
            self.plot = None
            gui.add_button("Run dataset doctor").on_click(self._gui(self.run_doctor))
            self.doctor_md = gui.add_markdown("")
            self.findings_folder = gui.add_folder("Doctor findings")
            self.table = gui.add_markdown("")
        if dataset is not None:
            self.open(dataset)

    def _gui(self, fn):
        def cb(_event):
            try:
                fn()
            except CaliperError as exc:
                self.summary.content = f"error: {exc}"

        return cb

    # ---- actions ---------------------------------------------------------------------------------------
    def open(self, root) -> dict:
        """Open the dataset at ``root``: episode table, first episode selected."""
        from caliper_jax.dataset import LeRobotReader

        if not str(root).strip():
            raise CaliperError("dataset folder: give a LeRobot v3 dataset root")
        reader = LeRobotReader(Path(str(root)))
        self.player.pause()
        self.reader, self.report, self._states, self._env = reader, None, None, None
        self._objects_of = None
        self._clear_findings()
        self.doctor_md.content = ""
        self.cameras.open(reader)
        keys = [
            k
            for k in reader.data_keys()
            if np.issubdtype(np.dtype(reader.features[k]["dtype"]), np.number)
            and k not in ("index", "episode_index", "frame_index", "task_index")
        ] or reader.data_keys()
        self.keys = keys
        self.root.value = str(root)
        self.summary.content = (
            f"`{reader.root.name}`: {reader.num_episodes} episode(s), {reader.num_frames} frames, "
            f"{reader.fps} fps"
        )
        self._syncing = True
        try:
            self.feat_in.options = tuple(keys)
            self.feat_in.value = STATE_KEY if STATE_KEY in keys else keys[0]
            self.ep_in.max = max(reader.num_episodes - 1, 0)
        finally:
            self._syncing = False
        self.feature = self.feat_in.value
        self.select(episode=0, frame=0, feature=self.feature, dim=0)
        return self.state()

    def _need(self):
        if self.reader is None:
            raise CaliperError("no dataset open")
        return self.reader

    def select(self, episode=None, frame=None, feature=None, dim=None) -> None:
        """Select episode / frame / feature / dimension: plot, table and robot follow."""
        from caliper_jax.studio.scene import import_viser

        uplot = import_viser().uplot  # pip install 'caliper-jax[studio]'

        reader = self._need()
        if episode is not None:
            reader.episode_meta(int(episode))  # range check with a clear message
            if int(episode) != self.episode:
                self.player.pause()
            self.episode = int(episode)
        if feature is not None:
            if feature not in self.keys:
                raise CaliperError(f"feature {feature!r}: expected one of {self.keys}")
            self.feature = feature
        length = int(reader.episode_meta(self.episode)["length"])
        if frame is not None:
            if not 0 <= int(frame) < max(length, 1):
                raise CaliperError(f"frame {frame}: episode {self.episode} has {length} frames")
            self.frame = int(frame)
        arr = np.asarray(reader.episode(self.episode, [self.feature])[self.feature], np.float64)
        arr = arr.reshape(arr.shape[0], -1)
        if dim is not None:
            if not 0 <= int(dim) < arr.shape[1]:
                raise CaliperError(f"dimension {dim}: {self.feature} has {arr.shape[1]}")
            self.dim = int(dim)
        self.dim = min(self.dim, arr.shape[1] - 1)
        x = np.arange(arr.shape[0], dtype=np.float64) / reader.fps
        y = arr[:, self.dim]
        names = reader.features[self.feature].get("names")
        label = f"{self.feature}[{self.dim}]"
        if isinstance(names, list) and len(names) == arr.shape[1] and all(isinstance(n, str) for n in names):
            label = f"{self.feature}.{names[self.dim]}"
        gui = self.app.server.gui
        if self.plot is not None:
            self.plot.remove()
        with self.tab:
            self.plot = gui.add_uplot(
                (x, y),
                (uplot.Series(label="t (s)"), uplot.Series(label=label, stroke="#d62")),
                scales={"x": uplot.Scale(time=False)},  # seconds from the episode start, not dates
                axes=(uplot.Axis(label="t (s)"), uplot.Axis(label=label)),
                title=f"episode {self.episode}: {label}",
                aspect=2.0,
                order=self.table.order - 0.5,
            )
        self._syncing = True
        try:
            self.ep_in.value = self.episode
            self.dim_in.value = self.dim
            self.frame_in.max = max(length - 1, 1)
            self.frame_in.value = self.frame
            self.feat_in.value = self.feature
        finally:
            self._syncing = False
        self._table()
        self._replay()

    def _objects(self) -> None:
        """The episode's task props and zones, drawn once per episode when its task label is a
        zoo task whose props match ``observation.environment_state`` (7 numbers a prop)."""
        reader = self.reader
        label = (reader.episode_meta(self.episode).get("tasks") or [None])[0]
        if self._objects_of == (self.episode, label):
            return
        for h in list(self.props.values()) + self._statics:
            h.remove()
        self.props, self._statics, self._objects_of = {}, [], (self.episode, label)
        names = reader.features.get(ENV_KEY, {}).get("names")
        if not label or not isinstance(names, list):
            return
        from caliper_jax.studio.simulate import draw_task_objects
        from tasks.schema import find_task, load_task

        try:
            task = load_task(find_task(label))
        except (CaliperError, OSError, ValueError):
            return  # not a zoo task: the state still replays, without props
        if [f"{p.name}.x" for p in task.props] != names[::7]:
            return
        self.props, self._statics = draw_task_objects(self.app.server.scene, task, "/data")

    def _replay_props(self) -> None:
        if not self.props:
            self.prop_poses = None
            return
        if self._env is None or self._env[0] != self.episode:
            rows = np.asarray(self.reader.episode(self.episode, [ENV_KEY])[ENV_KEY], np.float64)
            self._env = (self.episode, rows)
        row = self._env[1][self.frame].reshape(-1, 7)
        self.prop_poses = {}
        for (name, h), pose in zip(self.props.items(), row, strict=True):
            h.position, h.wxyz = pose[:3], pose[3:] / np.linalg.norm(pose[3:])
            self.prop_poses[name] = pose.tolist()

    def _replay(self) -> None:
        reader = self.reader
        self._objects()
        self._replay_props()
        self.cameras.show(self.episode, self.frame)
        if STATE_KEY not in reader.features:
            self.replayed = None
            return
        if self._states is None or self._states[0] != self.episode:
            rows = np.asarray(reader.episode(self.episode, [STATE_KEY])[STATE_KEY], np.float64)
            self._states = (self.episode, rows)
        state = self._states[1]
        if state.ndim == 2 and state.shape[1] == self.app.model.nq and self.frame < len(state):
            self.replayed = state[self.frame].tolist()
            self.app.jog.set_q(state[self.frame], move_gizmo=False)
        else:
            self.replayed = None

    # ---- playback ----------------------------------------------------------------------------------------
    def episode_length(self) -> int:
        return int(self._need().episode_meta(self.episode)["length"])

    def step(self, frame: int) -> None:
        """Show ``frame`` of the selected episode (frame slider, table, robot) without redrawing
        the plot: what each playback tick does."""
        length = self.episode_length()
        if not 0 <= int(frame) < max(length, 1):
            raise CaliperError(f"frame {frame}: episode {self.episode} has {length} frames")
        with self.app.lock:
            self.frame = int(frame)
            self._syncing = True
            try:
                self.frame_in.value = self.frame
            finally:
                self._syncing = False
            self._table()
            self._replay()

    def _seek(self, t: float) -> None:
        fps = float(self.reader.fps)
        self.step(min(int(np.floor(t * fps + 1e-9)), self.episode_length() - 1))

    def play(self, speed: float = 1.0) -> None:
        """Play the selected episode from the current frame (from frame 0 when at its last) at the
        dataset's fps (``speed`` x) on a background thread; ``pause()`` stops it."""
        reader = self._need()
        fps = float(reader.fps)
        self.player.play(self.frame / fps, (self.episode_length() - 1) / fps, speed)

    def pause(self) -> None:
        self.player.pause()

    @property
    def playing(self) -> bool:
        return self.player.playing

    def close(self) -> None:
        self.player.pause()

    def _table(self) -> None:
        reader = self.reader
        tags = reader.tags
        rows = ["| episode | length | task | tags |", "|---|---|---|---|"]
        for r in reader.episodes[:MAX_TABLE_ROWS]:
            e = int(r["episode_index"])
            mark = "**" if e == self.episode else ""
            tasks = ", ".join(r.get("tasks") or [])
            rows.append(f"| {mark}{e}{mark} | {r['length']} | {tasks} | {', '.join(tags.get(e, []))} |")
        if reader.num_episodes > MAX_TABLE_ROWS:
            rows.append(f"| ... | {reader.num_episodes - MAX_TABLE_ROWS} more | | |")
        self.table.content = f"**Episodes** (selected: {self.episode}, frame {self.frame})\n\n" + "\n".join(
            rows
        )

    def run_doctor(self) -> dict:
        """The dataset doctor on the open dataset; each finding becomes a jump button."""
        from doctors.dataset import diagnose

        reader = self._need()
        self.report = diagnose(reader.root, progress=False)
        self._clear_findings()
        c = self.report.counts
        self.doctor_md.content = (
            f"**Doctor**: {len(self.report.findings)} finding(s) -- {c['Error']} error, "
            f"{c['Warning']} warning, {c['Info']} info"
        )
        gui = self.app.server.gui
        with self.findings_folder:
            for i, f in enumerate(self.report.findings[:MAX_FINDING_BUTTONS]):
                b = gui.add_button(finding_label(f), hint=f.hint or None)
                b.on_click(self._gui(lambda i=i: self.jump(i)))
                self._buttons.append(b)
        return self.report.to_dict()

    def _clear_findings(self) -> None:
        for b in self._buttons:
            b.remove()
        self._buttons = []

    def jump(self, i: int) -> dict:
        """Select finding i's episode and frame (and feature / dof when it names them)."""
        if self.report is None or not 0 <= int(i) < len(self.report.findings):
            raise CaliperError(f"finding {i}: no such finding (run the doctor first)")
        f = self.report.findings[int(i)]
        feature = f.feature if f.feature in getattr(self, "keys", []) else None
        kw = {"feature": feature}
        if f.dof is not None and feature is not None:
            kw["dim"] = f.dof
        if f.episode is not None:
            self.select(episode=f.episode, frame=f.frame or 0, **kw)
        elif feature is not None:
            self.select(**kw)
        self.jumped = f.to_dict()
        return self.jumped

    def state(self) -> dict:
        if self.reader is None:
            return {"open": False}
        return {
            "open": True,
            "root": str(self.reader.root),
            "episodes": self.reader.num_episodes,
            "frames": self.reader.num_frames,
            "fps": self.reader.fps,
            "episode": self.episode,
            "frame": self.frame,
            "feature": self.feature,
            "dim": self.dim,
            "findings": None if self.report is None else [f.to_dict() for f in self.report.findings],
            "jumped": self.jumped,
            "replayed": getattr(self, "replayed", None),
            "props": self.prop_poses,
            "cameras": self.cameras.state(),
            "playing": self.playing,
            "play_error": self.player.error,
        }
