"""The garbage collector at rest: full collections when the window is at rest, never while it
works; what survives them out of later collections' reach; nothing frozen lost for good."""

from __future__ import annotations

import gc
import weakref

import pytest

from app.work.collector import IdleCollector

REST_S = 0.05


@pytest.fixture
def rest():
    """No full collection of Python's own (only the collector's), so what a test sees
    collected is the collector's doing; everything unfrozen after it."""
    thresholds = gc.get_threshold()
    gc.set_threshold(thresholds[0], thresholds[1], 10**9)
    yield
    gc.set_threshold(*thresholds)
    gc.unfreeze()


def _collector(busy) -> IdleCollector:  # type: ignore[no-untyped-def]
    """A collector at rest after REST_S (a short rest, so a test needs not wait long)."""
    return IdleCollector(busy, rest_s=REST_S, check_ms=10)


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def _cycles(count: int) -> None:
    """`count` pairs of objects that only each other hold: garbage only a collection finds."""
    for _ in range(count):
        a, b = Node(), Node()
        a.other, b.other = b, a


def _tracked(obj: object) -> bool:
    """Whether a collection walks `obj` (frozen objects are in no generation)."""
    return any(o is obj for o in gc.get_objects())


def _self_cycles(count: int) -> list[Node]:
    nodes = [Node() for _ in range(count)]
    for node in nodes:
        node.other = node
    return nodes


def test_at_rest_cycles_are_collected_and_what_survives_is_frozen(qtbot, rest):
    held = _self_cycles(20_000)
    gc.collect()  # in the oldest generation now, as a session's results and figures are
    watcher = _collector(lambda: False)
    survivor = Node()
    survivor.other = survivor  # a cycle that stays alive
    gone = [weakref.ref(node) for node in held[::100]]
    held.clear()  # garbage now, which only a full collection finds
    _cycles(20_000)  # young work meanwhile
    assert all(ref() is not None for ref in gone)  # young collections do not reach them
    qtbot.waitUntil(lambda: bool(watcher.collections), timeout=5000)
    _seconds, found, full = watcher.collections[0]
    assert found >= 20_000 and not full
    assert all(ref() is None for ref in gone)
    assert not _tracked(survivor)  # frozen: no later collection walks it
    assert survivor.other is survivor


def test_nothing_is_collected_while_work_is_under_way_or_changes_keep_coming(qtbot, rest):
    busy = [True]
    # A rest ten times the gap between changes: a loaded machine's late timer is not a rest.
    rest_s = 0.4
    watcher = IdleCollector(lambda: busy[0], rest_s=rest_s, check_ms=10)
    _cycles(20_000)
    qtbot.wait(round(rest_s * 1e3 * 2))
    assert watcher.collections == []  # a run or an export in flight
    busy[0] = False
    for _ in range(8):  # a change every tenth of a rest: never at rest
        watcher.active()
        qtbot.wait(round(rest_s * 1e3 / 10))
    assert watcher.collections == []
    qtbot.waitUntil(lambda: bool(watcher.collections), timeout=5000)


def test_nothing_new_since_the_last_collection_means_no_collection(qtbot, rest):
    watcher = _collector(lambda: False)
    _cycles(20_000)
    qtbot.waitUntil(lambda: bool(watcher.collections), timeout=5000)
    qtbot.wait(round(REST_S * 1e3 * 6))
    assert len(watcher.collections) == 1


def test_a_full_collection_reclaims_cycles_that_died_after_they_were_frozen(qtbot, rest):
    watcher = _collector(lambda: False)
    kept = _self_cycles(1000)
    watcher.collect()  # frozen while alive
    kept.clear()  # now garbage, but frozen: an ordinary collection cannot see it
    assert watcher.collect() < 1000
    assert watcher.collect(full=True) >= 1000


def test_the_window_collects_at_rest_until_it_closes(make_window):
    window = make_window()
    assert window.collector.running
    window.close()
    assert not window.collector.running
