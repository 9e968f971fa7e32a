"""What the Ring tab says in words: the step being played, the timeline's figures, memory per
device. Plain strings from plain data, so tests read them without Qt."""

from __future__ import annotations

from gpu.config import AttentionConfig
from gpu.ring.model import RingPrediction
from gpu.ring.schedule import DIAGONAL, FULL, SKIPPED, ZIGZAG, chunk_count, layout_for
from gpu.ring_timeline import RingMeasurement

from ..units import fmt_bytes, fmt_int, fmt_ms, fmt_rate
from .playback import MEASURED_CLOCK, MODEL_CLOCK, RingClock, RingFrame
from .runs import RingRun


def device_word(run: RingRun | None) -> str:
    """What a device is called: a GPU (measured over NCCL, or modelled), a rank (virtual ranks
    sharing one GPU through the test transport) or a device (the NumPy simulation)."""
    if run is None:
        return "GPU"
    transport = run.measurement.transport
    if transport == "simulated":
        return "device"
    return "GPU" if transport == "nccl" else "rank"


def chunks_text(chunks: tuple[int, ...]) -> str:
    return " · ".join(str(c) for c in chunks)


def split_text(config: AttentionConfig, devices: int, word: str) -> str:
    """How the sequence is split, in one sentence."""
    if devices == 1:
        return f"One {word} holds the whole sequence: the fused kernel alone, nothing to send."
    if layout_for(config.causal) == ZIGZAG:
        return (
            f"Causal mask, zigzag split: N is cut into 2P = {2 * devices} chunks and {word} d "
            f"holds chunks d and {2 * devices - 1} − d, so every {word} scores the same number "
            "of (query, key) pairs."
        )
    return f"No mask, contiguous split: {word} d holds chunk d of P = {devices}."


def step_caption(frame: RingFrame, config: AttentionConfig, word: str) -> str:
    """The step under the playhead: what every device computes and what it sends on."""
    p = frame.devices
    if p == 1:  # the split line above says where the sequence is; this one what plays
        return f"Nothing travels with one {word}: pick P > 1 to play the ring's steps."
    if frame.step >= p:
        return (
            f"Done: after {p} steps every query has met every key once; each {word}'s running "
            "(O, m, l), merged with the online-softmax rescale, is its rows of the output."
        )
    node = next((n for n in frame.nodes if n.held.step == frame.step), frame.nodes[0])
    held = node.held
    kinds = [pair.kind for pair in held.pairs]
    pairs = ", ".join(f"{kinds.count(k)} {k}" for k in (FULL, DIAGONAL, SKIPPED) if kinds.count(k))
    text = (
        f"Step {frame.step + 1} of {p}: each {word} runs the fused kernel on its queries against "
        f"the K/V block it holds ({pairs} chunk pair{'s' if len(kinds) > 1 else ''}; "
        f"{word} {held.device} holds {word} {held.block_owner}'s block, chunks "
        f"{chunks_text(held.kv_chunks)}) and merges the result"
    )
    if held.sends_to is None:
        return text + "; the last step sends nothing."
    return (
        text + f", while it passes that block ({fmt_bytes(held.bytes_sent)}) to the next {word} "
        "on a second stream."
    )


def too_short_text(config: AttentionConfig, devices: int) -> str:
    """Why the model has nothing for (config, P), '' when it has."""
    chunks = chunk_count(devices, config.causal)
    if config.seq_len >= chunks:
        return ""
    return (
        f"N = {fmt_int(config.seq_len)} is too short for the model at P = {devices}: the "
        f"{'zigzag ' if config.causal else ''}split needs {chunks} chunks of at least one row. "
        "The ring view plays the schedule's order only."
    )


def timeline_summary(
    measurement: RingMeasurement | None,
    clock: RingClock | None,
    prediction: RingPrediction | None,
    word: str,
    too_short: str = "",
) -> str:
    """The timeline's figures: measured (hidden share, link speed against its peak) or the
    model's (compute against transfer per step); `too_short` when the model has none. `word`:
    what a device is called (`device_word`)."""
    if clock is not None and clock.source == MEASURED_CLOCK and measurement is not None:
        return measured_summary(measurement, word)
    parts = []
    if measurement is not None and measurement.transport == "simulated":
        parts.append(
            "The NumPy simulation runs its virtual devices one after another: no stream events. "
            "Below, the model's timeline for the same config."
        )
    if clock is not None and clock.source == MODEL_CLOCK and prediction is not None:
        parts.append(model_summary(prediction))
    elif too_short:
        parts.append(too_short)
    elif prediction is None:
        parts.append("Working out the model's timeline…")
    return " ".join(parts)


def measured_summary(m: RingMeasurement, word: str) -> str:
    parts = [f"Measured with CUDA events on each {word}'s compute and communication streams"]
    hidden = m.hidden_fraction
    if hidden is None:
        parts.append("nothing sent (one device)")
    else:
        parts.append(f"communication hidden behind compute: {hidden:.0%}")
    achieved = m.achieved_bytes_s
    if achieved is not None:
        link = f"link: {fmt_rate(achieved, 'B/s')} achieved per direction"
        if m.link_peak_bytes_s:
            link += (
                f", {m.link_utilisation:.0%} of the {fmt_rate(m.link_peak_bytes_s, 'B/s')} peak"
                f" of {m.link or 'the link'}"
            )
        else:
            link += f" ({m.transport}; no link peak to compare with)"
        parts.append(link)
    if m.max_abs_diff_vs_single is not None:
        parts.append(f"max |ΔO| against one device: {m.max_abs_diff_vs_single:.1e}")
    return " · ".join(parts) + "."


def model_summary(p: RingPrediction) -> str:
    """Per step: compute against transfer, and whether the transfer hides."""
    if p.devices == 1:
        return f"Model: one device, {fmt_ms(p.total_s * 1e3)} for the whole sequence."
    verdict = (
        "the transfer hides behind compute"
        if p.hidden
        else f"the transfer is exposed: {fmt_ms(p.exposed_s * 1e3)} of waiting in all"
    )
    return (
        f"Model ({p.throughput}): each step computes {fmt_ms(p.step_compute_s * 1e3)} and sends "
        f"{fmt_bytes(p.step_bytes)} in {fmt_ms(p.step_transfer_s * 1e3)} over {p.link} — "
        f"{verdict}. Total {fmt_ms(p.total_s * 1e3)} against {fmt_ms(p.single_s * 1e3)} on one "
        f"GPU: ×{p.speedup:.2f}, {p.efficiency:.0%} efficiency."
    )


def memory_caption(
    config: AttentionConfig, devices: int, run: RingRun | None, model_bytes: int
) -> str:
    if run is not None and run.measurement.device_peak_bytes:
        transport = run.measurement.transport
        if transport == "simulated":
            how = "the arrays each virtual device held (NumPy)"
        elif transport == "nccl":
            how = "the memory pool's peak on each GPU above its baseline"
        else:  # virtual ranks on one GPU share its pool
            how = "the pool's peak on the one GPU the ranks share, so every rank shows all of it"
        return (
            f"Measured: {how}. Model: {fmt_bytes(model_bytes)} per device at "
            f"N = {fmt_int(config.seq_len)}, P = {devices}."
        )
    return (
        f"Model: {fmt_bytes(model_bytes)} per device at N = {fmt_int(config.seq_len)}, "
        f"P = {devices} (Q, its K/V block and receive buffers, running O, m, l)."
    )
