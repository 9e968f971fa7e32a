"""Every backend comes from one factory, by name (gpu/backend_factory.py): the CPU and CUDA
backends, the ring over P devices, the cost model's backend, and, in the app, a recorded run;
the window asks it for the backend a choice and a device count mean, and never builds one
itself."""

from __future__ import annotations

import pytest

import gpu.backend_factory as factory
from app.state.recorded_run import RecordedBackend
from app.state.ring.devices import SIMULATED_MAX, backend_for
from app.window.backend_control import window_backends
from gpu.algorithms import NAIVE, TILED
from gpu.backend_factory import (
    BACKENDS,
    MODEL_BACKEND,
    REPLAY,
    RING_BACKEND,
    BackendRequest,
    create_backend,
)
from gpu.backends.backend import RunOptions
from gpu.backends.cpu_backend import CpuBackend
from gpu.backends.model_backend import CostModelBackend
from gpu.config import AttentionConfig
from gpu.errors import BackendUnavailable
from gpu.files.recording import Recording, save_recording
from gpu.ring.backend import RingBackend


def test_the_engine_makes_each_of_its_backends_by_name(monkeypatch):
    monkeypatch.setattr(factory, "cuda_available", lambda: False)
    assert isinstance(create_backend("cpu"), CpuBackend)
    assert isinstance(create_backend("auto"), CpuBackend)  # no CUDA device here
    assert isinstance(create_backend(MODEL_BACKEND), CostModelBackend)
    ring = create_backend(BackendRequest(RING_BACKEND, devices=3, on="cpu"))
    assert isinstance(ring, RingBackend) and (ring.name, ring.devices) == ("cpu", 3)
    with pytest.raises(BackendUnavailable, match="cuda backend unavailable"):
        create_backend("cuda")


def test_a_name_it_does_not_know_is_refused_with_the_names_it_knows():
    with pytest.raises(ValueError, match="backend = 'tpu' is not allowed: one of auto, cuda"):
        create_backend("tpu")
    # A recorded run is the app's (app/state/recorded_run.py): the engine alone has none.
    assert REPLAY not in BACKENDS.names
    with pytest.raises(ValueError, match="'replay' is not allowed"):
        create_backend(BackendRequest(REPLAY, path="run.json"))


def test_with_makers_gives_a_new_factory_and_leaves_the_old_one_alone():
    fake = CostModelBackend(name="cpu")
    faked = BACKENDS.with_makers({"cpu": lambda _: fake})
    assert faked("cpu") is fake
    assert isinstance(BACKENDS("cpu"), CpuBackend)
    assert faked.names == BACKENDS.names


def test_the_windows_factory_opens_a_recorded_run_and_takes_fakes_for_one_device(tmp_path):
    backend = CpuBackend()
    cfg = AttentionConfig(seq_len=64, heads=2, head_dim=16)
    runs = tuple(backend.run(cfg, a, RunOptions(warmup=0, repeats=1)) for a in (NAIVE, TILED))
    path = tmp_path / "run.json"
    save_recording(Recording(backend.device_info(), runs, {"command": "test"}), path)
    fake = CostModelBackend()
    backends = window_backends(lambda name: fake)
    recorded = backends(BackendRequest(REPLAY, path=str(path)))
    assert isinstance(recorded, RecordedBackend)
    assert [(r.algorithm, r.total_ms) for r in recorded.results()] == [
        (r.algorithm, r.total_ms) for r in runs
    ]
    assert backends("auto") is backends("cuda") is backends("cpu") is fake
    assert isinstance(backends(BackendRequest(RING_BACKEND, devices=2, on="cpu")), RingBackend)
    # What the window starts for a choice: the file, the ring where P runs here, one device.
    assert isinstance(backend_for("recorded", 4, backends, str(path)), RecordedBackend)
    assert isinstance(backend_for("cpu", 2, backends), RingBackend)
    assert backend_for("cpu", SIMULATED_MAX * 2, backends) is fake
    assert backend_for("cpu", 1, backends) is fake
