"""Every backend made in one place, from a name: `auto`, `cuda`, `cpu`, `ring` (P devices of
the cuda or cpu backend), `model` (the cost model's answers), and `replay` (a recorded run),
which lives in the app (app/state/recorded_run.py) and is added there with `with_makers`.

`auto` picks cuda when CuPy sees a device, else cpu. Backends are imported lazily: CuPy can
take seconds to import and is optional, so the CPU path and the cost model never pay for it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .backends.backend import Backend
from .backends.cuda_check import cuda_available
from .errors import BackendUnavailable

#: The backends of one device the command line's --backend offers.
DEVICE_BACKENDS = ("auto", "cuda", "cpu")
#: Names of the ring's and the cost model's backends, and of a recorded run's.
RING_BACKEND, MODEL_BACKEND, REPLAY = "ring", "model", "replay"


@dataclass(frozen=True)
class BackendRequest:
    """Which backend to make: its name, and what that kind needs. `devices` and `on` are the
    ring's P and the backend each of its devices runs ("cuda" measures, "cpu" simulates);
    `path` is a recorded run's file."""

    name: str = "auto"
    devices: int = 1
    on: str = "auto"
    path: str = ""


Maker = Callable[[BackendRequest], Backend]


def _one_device(request: BackendRequest) -> Backend:
    name = request.name
    if name == "auto":
        name = "cuda" if cuda_available() else "cpu"
    if name == "cpu":
        from .backends.cpu_backend import CpuBackend

        return CpuBackend()
    if not cuda_available():
        raise BackendUnavailable(
            "cuda backend unavailable: CuPy is not installed or sees no CUDA device "
            "(install the cuda12 or cuda13 extra on a machine with an NVIDIA GPU)"
        )
    from .backends.cuda_backend import CudaBackend

    return CudaBackend()


def _ring(request: BackendRequest) -> Backend:
    from .ring.backend import RingBackend

    return RingBackend(request.on, request.devices)


def _model(request: BackendRequest) -> Backend:
    from .backends.model_backend import CostModelBackend

    return CostModelBackend()


class BackendFactory:
    """Makes a backend from a name or a `BackendRequest`. `with_makers` gives a factory with
    other makers for some names (the app's recorded runs; tests' fakes), this one unchanged."""

    def __init__(self, makers: Mapping[str, Maker]) -> None:
        self._makers = dict(makers)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._makers)

    def with_makers(self, makers: Mapping[str, Maker]) -> BackendFactory:
        return BackendFactory({**self._makers, **makers})

    def __call__(self, request: BackendRequest | str = "auto") -> Backend:
        if isinstance(request, str):
            request = BackendRequest(request)
        maker = self._makers.get(request.name)
        if maker is None:
            raise ValueError(
                f"backend = {request.name!r} is not allowed: one of {', '.join(self._makers)}"
            )
        return maker(request)


#: The engine's own backends; the app adds its recorded runs (`REPLAY`).
BACKENDS = BackendFactory(
    {
        "auto": _one_device,
        "cuda": _one_device,
        "cpu": _one_device,
        RING_BACKEND: _ring,
        MODEL_BACKEND: _model,
    }
)


def create_backend(request: BackendRequest | str = "auto") -> Backend:
    """A backend of the engine's own (`BACKENDS`) by name or request."""
    return BACKENDS(request)
