"""A figure reads the same wherever the window shows it: the explain pane, the status bar's
last run, the Tiles tab's banner and the plots' hover read-outs all read one current point
(app/state/current_point.py), and that point's figures are the recording's counters."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from gpu.algorithms import NAIVE, TILED_WS

ROOT = Path(__file__).resolve().parent.parent
SWEEP = ROOT / "resources" / "recorded" / "h200_sweep.json"
N = 16384


def _naive_dram_by_hand() -> int:
    """Naive's DRAM bytes at N = 16384 from the raw counters: every kernel's reads, and its
    writes or its compulsory output (S, P: 12·N²·2 B; O: 12·N·64·2 B), whichever is more."""
    (r,) = [
        r
        for r in json.loads(SWEEP.read_text())["results"]
        if r["algorithm"] == NAIVE
        and r["config"]["seq_len"] == N
        and not r["config"]["causal"]
        and r["config"]["head_dim"] == 64
    ]
    due = {"gemm_qk": 12 * N * N * 2, "softmax": 12 * N * N * 2, "gemm_pv": 12 * N * 64 * 2}
    return sum(
        t["dram_read_bytes"] + max(t["dram_write_bytes"], due[t["name"]]) for t in r["traffic"]
    )


def _plain(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html))


def test_at_16384_every_view_reads_naives_dram_bytes_and_verdict_from_one_point(make_window, qtbot):
    """One window session (a replay is seconds on a busy machine) for both: the views agree,
    and the Tiles banner labels the tile loads as the model's beside the measured DRAM."""
    from PySide6.QtCore import QSize

    from app.measure.explain import binds_text
    from app.state.current_point import point_for
    from app.state.units import fmt_bytes, fmt_ms

    window = make_window(seq_len=4096)
    qtbot.waitUntil(lambda: window.animation is not None, timeout=5000)
    window.tabs.setCurrentWidget(window.animation)
    anim = window.animation
    window.backend_switch.open_recorded(str(SWEEP))
    qtbot.waitUntil(lambda: window.state.value.replay, timeout=10_000)
    window.state.update(config=window.config.with_(seq_len=N))
    qtbot.waitUntil(
        lambda: (
            anim.player.config.seq_len == N
            and all(lane.clock.measured for lane in anim.player.lanes)
        ),
        timeout=20_000,
    )
    anim.flush()
    s = window.state.value
    pane_inputs = window.explain._inputs  # what the explain pane shows, hidden or not
    results = dict(pane_inputs.results)
    assert NAIVE in results and NAIVE in s.algorithms and pane_inputs.config == s.config

    # The one point, and its figure: the counters, by hand
    point = point_for(s.config, s.algorithms, s.roof_device, results)
    naive = point.algorithm(NAIVE)
    dram = _naive_dram_by_hand()
    assert naive.dram_bytes.value == dram and naive.dram_bytes.source == "measured"
    dram_text, bytes_text = naive.dram_bytes.text(), fmt_bytes(dram)
    v = naive.verdict
    assert v.bound == "memory" and v.ties == ("hbm",)

    # The explain pane: the ratio line's bytes and naive's verdict
    pane = _plain(window.explain.plain_text())
    assert f"({bytes_text} vs " in pane
    verdict = f"naive: {v.bound}-bound — {binds_text(v.ties)}; roofline {fmt_ms(v.roofline_ms)}"
    assert verdict in pane

    # The Tiles banner: the same bytes, labelled measured
    texts = {it.key: it.text for it in anim.canvas.text_items()}
    # at a width where the banner's longest wording fits (it shortens in a narrow window)
    wide = {it.key: it.text for it in anim.canvas.text_items(QSize(2400, 900))}
    banner = wide["header.verdict"]
    assert f"DRAM (measured): {bytes_text} vs " in banner
    other = next(lane.algorithm for lane in anim.player.lanes if lane.algorithm != NAIVE)
    ratio = point.dram_ratios[f"naive/{other}"]
    assert ratio.source == "measured" and f"{ratio.value:,.0f}× fewer" in banner
    # ... and calls the lanes' tile loads the model's, never "HBM traffic" (the column title
    # "HBM" and the link's "read →" are separate texts)
    assert "loads (model)" in banner and "loads (model)" in texts["header.verdict"]
    assert "HBM traffic" not in banner
    assert not [t for t in texts.values() if "HBM read" in t or "HBM written" in t]

    # The plots' hover read-outs: the traffic plot and the roofline marker (the plots catch
    # up with the results when their tab is shown)
    window.tabs.setCurrentIndex(0)
    qtbot.waitUntil(lambda: window.plots.current_results() == results, timeout=10_000)
    traffic = window.plots.hover.traffic(math.log10(N), 0.0)
    assert f"DRAM {dram_text}" in traffic
    naive_result = results[NAIVE]
    roofline = window.plots.hover.roofline(
        math.log10(v.intensity), math.log10(naive_result.tflops * 1e12)
    )
    assert roofline.startswith("naive, N = ")
    assert f"{v.bound}-bound" in roofline and f"roofline {fmt_ms(v.roofline_ms)}" in roofline
    assert "(measured DRAM bytes)" in roofline
    # a tie reads as the tie it is on the roofline's hover too, as in the pane
    ws = point.algorithm(TILED_WS).verdict
    tie = window.plots.hover.roofline(
        math.log10(ws.intensity), math.log10(results[TILED_WS].tflops * 1e12)
    )
    assert ws.tie and binds_text(ws.ties) in tie and binds_text(ws.ties) in pane

    # The status bar's last run, as the window writes it for naive's result
    window.readouts.set_last(naive_result, window.measurements.last_figures(naive_result))
    status = window.readouts.last.text()
    assert f"DRAM {dram_text}" in status
    assert f"{v.bound}-bound: {binds_text(v.ties)}" in status
    assert f"peak {fmt_bytes(naive.peak_bytes.value)}" in status
