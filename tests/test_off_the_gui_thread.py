"""Work that would hold the interpreter from the GUI thread is done elsewhere or in pieces: large
object graphs are freed on a thread of their own, a few objects at a time, changing nothing
that someone else still holds; a large file comes back from the compute process in pieces."""

from __future__ import annotations

import threading
import time
import weakref

from app.work import release


class Leaf:
    pass


def _wait_freed(before: int, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while release.freed() <= before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert release.freed() > before


def test_a_handed_over_graph_is_freed_on_the_release_thread():
    freed_on = []
    leaves = [Leaf() for _ in range(5000)]
    for leaf in leaves:
        weakref.finalize(leaf, lambda: freed_on.append(threading.current_thread().name))
    graph = {"results": {n: [leaf] for n, leaf in enumerate(leaves)}, "all": tuple(leaves)}
    probe = weakref.ref(leaves[0])
    before = release.freed()
    release.free_later(graph)
    del graph, leaves, leaf
    _wait_freed(before)
    assert probe() is None
    assert len(freed_on) == 5000 and set(freed_on) == {"tilescope-release"}


def test_it_waits_for_the_other_holders_before_it_takes_anything_apart():
    shared = {n: Leaf() for n in range(100)}
    graph = {"shared": shared, "own": [Leaf() for _ in range(100)]}
    kept = graph  # another holder, still using it
    before = release.freed()
    release.free_later(graph)
    del graph
    time.sleep(0.3)
    assert release.freed() == before  # not while someone else holds it
    assert len(kept["own"]) == 100 and len(kept["shared"]) == 100
    del kept
    _wait_freed(before)


def test_a_container_someone_else_still_holds_is_let_go_of_not_emptied():
    shared = {n: Leaf() for n in range(100)}
    before = release.freed()
    release.free_later({"shared": shared, "own": [Leaf() for _ in range(100)]})
    _wait_freed(before)
    assert len(shared) == 100  # still whole for its other holder


def test_a_large_file_comes_back_from_the_compute_process_a_piece_at_a_time(tmp_path, monkeypatch):
    """One result of tens of MB would be unpickled in one call on the pool's thread, holding
    the interpreter from the GUI thread for as long: the members come back a piece per call."""
    import json
    import pickle

    from app.state.recorded_run import read_members
    from app.work import background
    from tests.document_mutations import BASE

    doc = dict(BASE, results=[dict(r, message="x" * 2000) for r in BASE["results"]] * 400)
    path = tmp_path / "large.json"
    path.write_text(json.dumps(doc))
    assert path.stat().st_size > 6e6
    sizes = []
    real = background.in_process

    def measured(func, *args):
        job = real(func, *args)

        def work():
            result = job()
            sizes.append(len(pickle.dumps(result)))
            return result

        return work

    monkeypatch.setattr(background, "in_process", measured)
    source_id, members = background.read_elsewhere(str(path))
    assert (source_id, members) == read_members(str(path))
    assert len(sizes) > 6 and max(sizes) < 1.5e6
