"""The application state: one immutable snapshot, one place that changes it, one notification.

`AppState` holds every input of what the window shows (config, algorithms, budget, backend,
recorded run, the slider's scale) as typed fields, plus derived properties computed from them
(enabled algorithms, family, budget, roofline GPU, run budget). `StateModel` owns the current
snapshot: `update(**changes)` replaces it atomically and calls each subscriber once with a
`Change` (old snapshot, new snapshot, the fields that changed); a no-op update calls nobody.
"""

from __future__ import annotations

import types
import typing
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from functools import cached_property

from gpu.algorithms import ALGORITHMS, NAIVE, TILED, runs_pass
from gpu.config import AttentionConfig
from gpu.model.costmodel import DEFAULT_GPU, GPUS, GpuSpec, gpu_for_device_name
from gpu.model.roofline import device_gpu

from .budget import CUSTOM_PRESET, DEVICE_PRESET, Budget, Device, budget_for
from .family import Family, family
from .recorded_run import REPLAY
from .runs import BackendReady
from .seq_scale import SEQ_MAX, SEQ_MIN, default_scale, nearest_index

#: Backends whose device is a GPU: their roofline times are drawn, their name is a GpuSpec's.
GPU_BACKENDS = ("cuda", REPLAY)


@dataclass(frozen=True)
class AppState:
    """Every input of the window, as one immutable snapshot (see the module docstring)."""

    config: AttentionConfig = field(default_factory=lambda: AttentionConfig(seq_len=1024))
    #: The algorithms the user has ticked (whether or not the backend runs them).
    checked: tuple[str, ...] = tuple(ALGORITHMS)
    #: What the backend runs now, less those switched off this session.
    available: tuple[str, ...] = (NAIVE, TILED)
    #: (algorithm, why) switched off this session (a kernel that will not compile).
    disabled: tuple[tuple[str, str], ...] = ()
    budget_preset: str = DEVICE_PRESET
    custom_budget_gb: float = 16.0
    #: What the user asked for: "auto", "cuda", "cpu" or "recorded".
    backend_choice: str = "auto"
    #: The backend in use; None while one is starting (or none could start).
    backend: BackendReady | None = None
    #: The results file a "recorded" backend replays.
    recorded_path: str = ""
    #: The slider's stops when they are a recorded run's N; None: the log scale, any N.
    seq_scale: tuple[int, ...] | None = None
    #: Sample each kernel's hardware counters after timing it (CUDA: DRAM/L2 bytes, tensor
    #: and exponential-unit activity); timing runs stay unsampled.
    measure_bytes: bool = False
    #: Why the running backend cannot measure bytes after all (the counters refused: no
    #: permission, no CUPTI); '' while it may. Cleared when another backend starts.
    bytes_refused: str = ""
    #: Devices P the ring splits the sequence over (1: one device; app/state/ring/devices.py).
    devices: int = 1
    #: Whether the user ticked the algorithms (else the default view's choice follows the
    #: backend: naive and its fastest fused kernel; app/state/default_view.py).
    algorithms_chosen: bool = False
    #: "Every series": every algorithm, every peer, naive's kernel lines (else the default
    #: view's few).
    all_series: bool = False
    #: Attention layers L whose saved activations a training step stacks up (the memory plot's
    #: L-layer lines and the explain pane's wall for L layers; gpu/model/layer_stack.py).
    layers: int = 12
    #: What fits at inference (the decode pass: app/state/decode_fit.py): the storage types of
    #: the model preset's weights and of its KV cache, for the memory plot's wall, the explain
    #: pane's formula and the lesson.
    fit_weights: str = "fp16"
    fit_kv: str = "fp16"

    # ------------------------------------------------------------------ derived

    @cached_property
    def algorithms(self) -> tuple[str, ...]:
        """Ticked, available and written for the config's pass (a decode kernel has no
        prefill, a prefill kernel no decode), in the registry's order: what is measured and
        drawn."""
        off = {a for a, _ in self.disabled}
        pass_ = self.config.pass_
        return tuple(
            a
            for a in ALGORITHMS
            if a in self.checked and a in self.available and a not in off and runs_pass(a, pass_)
        )

    @cached_property
    def family(self) -> Family:
        return family(self.config)

    @property
    def backend_name(self) -> str:
        """The running backend's kind ("cuda", "cpu", "replay", ...), '' while none runs."""
        return self.backend.info.backend if self.backend is not None else ""

    @property
    def replay(self) -> bool:
        return self.backend_name == REPLAY

    @property
    def training(self) -> bool:
        """Whether the config's pass computes gradients (a training step or its backward)."""
        return self.config.has_backward

    @property
    def bytes_unmeasurable(self) -> str:
        """Why "Measure bytes" cannot work on the running backend, '' when it can."""
        name = self.backend_name
        if name == "cuda":
            return self.bytes_refused
        if name == REPLAY:
            return "a recorded run shows the bytes it was recorded with (measured if profiled)"
        if not name:
            return "no backend is running yet"
        return (
            f"the {name} backend has no hardware counters: measuring bytes needs the CUDA "
            "backend on an NVIDIA GPU (CUPTI); the figures stay the model's"
        )

    @property
    def profile_runs(self) -> bool:
        """Whether runs sample the counters: asked for, and possible here."""
        return self.measure_bytes and self.backend_name == "cuda" and not self.bytes_refused

    @property
    def on_gpu(self) -> bool:
        """Whether the results come from a GPU (live or recorded): roofline times apply."""
        return self.backend_name in GPU_BACKENDS

    @cached_property
    def device(self) -> Device:
        ready = self.backend
        if ready is None:
            return Device()
        info = ready.info
        known = info.backend in GPU_BACKENDS and gpu_for_device_name(info.name) is not None
        # The table's entry, with the L2 bandwidth and clock measured on this device where it
        # says so; on the CPU backend, this CPU's own roofs.
        gpu = device_gpu(info) if known else None
        cpu = device_gpu(info) if info.backend == "cpu" else None
        label = {"cpu": "CPU RAM"}.get(info.backend, info.name)
        reported = info.memory_total_bytes or None
        # One rule for a GPU's capacity (app/state/budget.py): the table's, where it knows it.
        capacity = gpu.memory_bytes if gpu is not None else reported
        return Device(capacity, label, gpu, cpu, reported)

    @cached_property
    def budget(self) -> Budget:
        return budget_for(self.budget_preset, self.custom_budget_gb, self.device)

    @property
    def run_budget(self) -> int | None:
        """The budget runs are measured under (a recording cannot be re-run under another)."""
        return None if self.replay else self.budget.run_bytes

    @property
    def target_gpu(self) -> GpuSpec:
        """The GPU whose roofline and ridge point the plots, verdicts and animation use."""
        return self.budget.gpu or GPUS[DEFAULT_GPU]

    @property
    def roof_device(self) -> GpuSpec:
        """The device whose roofs judge the results (roofline plot, verdicts, explain): this
        CPU's own on the CPU backend, else `target_gpu`."""
        cpu = self.device.cpu
        return cpu if cpu is not None and self.backend_name == "cpu" else self.target_gpu

    @property
    def roof_device_label(self) -> str:
        cpu = self.device.cpu
        if cpu is not None and self.backend_name == "cpu":
            # The roofline's title is what precedes the comma: "this CPU".
            return f"this CPU, {cpu.label.removeprefix('CPU: ')}"
        return self.target_gpu_label

    @property
    def target_gpu_label(self) -> str:
        """'H200 SXM, 141 GB' (GpuSpec.label: the datasheet's capacity, decimal)."""
        gpu = self.budget.gpu
        return gpu.label if gpu is not None else f"{GPUS[DEFAULT_GPU].label} (reference)"

    @property
    def budget_name(self) -> str:
        """How the explain pane names the budget: "an RTX 4090", "this H200", ..."""
        b = self.budget
        if b.preset == DEVICE_PRESET:
            if self.backend_name == "cpu":
                return "this machine's RAM"
            return f"this {self.backend.info.name}" if self.backend is not None else "this device"
        if b.preset == CUSTOM_PRESET:
            return "the custom budget"
        # Read as letters: "an RTX 4090", "an H100", "a GTX 1080", "a T4".
        name = b.gpu.label.split(",")[0] if b.gpu is not None else b.label
        return f"an {name}" if name[:1] in "AEFHILMNORSX" else f"a {name}"

    @property
    def budget_line_label(self) -> str:
        return self.budget.label if self.budget.preset != DEVICE_PRESET else "this device"

    @property
    def scale(self) -> tuple[int, ...]:
        """The slider's stops: a recorded run's N, else the log scale."""
        return self.seq_scale or _DEFAULT_SCALE

    def snap(self, n: int) -> int:
        """The N the slider can show for `n`: itself on the log scale (within its range), else
        the nearest stop."""
        if self.seq_scale is None and SEQ_MIN <= n <= SEQ_MAX:
            return n
        scale = self.scale
        return scale[nearest_index(scale, n)]


_DEFAULT_SCALE = default_scale()
_FIELDS = tuple(f.name for f in fields(AppState))
_FIELD_SET = frozenset(_FIELDS)


@dataclass(frozen=True)
class Change:
    """One applied update: the snapshot before and after, and the fields that changed.

    `old` is None for the first look a view takes at a state (everything counts as changed)."""

    old: AppState | None
    new: AppState
    fields: frozenset[str]

    @classmethod
    def initial(cls, state: AppState) -> Change:
        return cls(None, state, frozenset(_FIELDS))

    @classmethod
    def between(cls, old: AppState | None, new: AppState) -> Change:
        """The change from `old` to `new` (for a view that skipped some while hidden)."""
        if old is None:
            return cls.initial(new)
        return cls(old, new, frozenset(f for f in _FIELDS if getattr(old, f) != getattr(new, f)))

    def changed(self, *names: str) -> bool:
        """Whether any of `names` (fields or derived properties) differs between old and new."""
        if self.old is None:
            return True
        for n in names:
            if n in _FIELD_SET:  # a field: the update says whether it changed
                if n in self.fields:
                    return True
            elif getattr(self.old, n) != getattr(self.new, n):
                return True
        return False


Subscriber = Callable[[Change], object]


class StateModel:
    """Owns the current AppState; see the module docstring.

    An update made by a subscriber while others are being told of a change is applied after
    every subscriber has seen the current one, so all of them see changes in the same order.
    """

    def __init__(self, state: AppState | None = None) -> None:
        self._state = state if state is not None else AppState()
        self._subscribers: list[Subscriber] = []
        self._queue: deque[dict[str, object]] = deque()
        self._notifying = False
        self.updates = 0  # changes applied (for tests and benchmarks)

    @property
    def value(self) -> AppState:
        return self._state

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call `callback(change)` after every change; returns a function that unsubscribes."""
        self._subscribers.append(callback)
        return lambda: self._subscribers.remove(callback)

    def update(self, **changes: object) -> None:
        """Apply `changes` (field=value) atomically, then notify each subscriber once."""
        for name, value in changes.items():
            _check(name, value)
        self._queue.append(changes)
        if self._notifying:
            return  # applied once the current notification round is over
        self._notifying = True
        errors: list[BaseException] = []
        try:
            while self._queue:
                self._apply(self._queue.popleft(), errors)
        finally:
            self._notifying = False
        if errors:  # every subscriber heard of every change; now say what went wrong
            raise errors[0]

    def _apply(self, changes: dict[str, object], errors: list[BaseException]) -> None:
        old = self._state
        changed = frozenset(n for n, v in changes.items() if getattr(old, n) != v)
        if not changed:
            return
        self._state = replace(old, **{n: changes[n] for n in changed})
        self.updates += 1
        change = Change(old, self._state, changed)
        for callback in list(self._subscribers):
            try:
                callback(change)
            except Exception as exc:
                errors.append(exc)


_HINTS = typing.get_type_hints(AppState)


def _check(name: str, value: object) -> None:
    if name not in _HINTS:
        raise TypeError(f"AppState has no field {name!r}")
    if not _conforms(value, _HINTS[name]):
        raise TypeError(f"AppState.{name} must be {_HINTS[name]}, not {value!r}")


def _conforms(value: object, hint: object) -> bool:
    """A shallow isinstance for the field types used here (classes, X | None, tuple[...])."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_conforms(value, h) for h in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if origin is not None:
        return isinstance(value, origin)
    return isinstance(value, hint) if isinstance(hint, type) else True
