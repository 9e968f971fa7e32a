"""The Hopper kernels name their barriers: every `bar.sync` / `bar.arrive` id comes from one
enum (`NamedBarrier` in gpu/kernels/hopper.cuh), whose ids are distinct and within the
hardware's 1..15, so two uses cannot collide on a literal id."""

from __future__ import annotations

import re

from gpu.launch.cuda_kernels import KERNEL_DIR

CALL = re.compile(r"named_bar_(?:sync|arrive)\(\s*([^,]+),")
ENUM = re.compile(r"enum\s+class\s+NamedBarrier\s*:\s*int\s*\{(.*?)\};", re.DOTALL)


def _sources() -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(KERNEL_DIR.glob("*.cu*"))}


def test_no_kernel_passes_a_literal_barrier_id():
    calls = [
        (name, arg.strip())
        for name, text in _sources().items()
        for arg in CALL.findall(text)
        if name != "hopper.cuh"
    ]
    assert calls, "the warp-specialized kernel's ping-pong uses named barriers"
    assert [c for c in calls if re.match(r"^[\d(+ ]", c[1])] == []
    assert all("pingpong_turn_barrier(" in arg for _, arg in calls), calls


def test_the_named_barrier_ids_are_distinct_and_within_1_to_15():
    (body,) = ENUM.findall((KERNEL_DIR / "hopper.cuh").read_text())
    ids = {name: int(value) for name, value in re.findall(r"(\w+)\s*=\s*(\d+)", body)}
    assert ids == {"PingPongTurn0": 1, "PingPongTurn1": 2, "PingPongTurn2": 3}
    assert len(set(ids.values())) == len(ids) and all(1 <= i <= 15 for i in ids.values())
