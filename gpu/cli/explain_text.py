"""`main.py explain` as text: per algorithm and kernel, the roof that binds, its DRAM bytes and
where they come from (measured or model), the roofline and measured times, and the share of
each roof's peak; then the naive/tiled byte ratios and the model's check against counters."""

from __future__ import annotations

from gpu.units import fmt_bytes, fmt_ms_column, fmt_si


def _roof_text(v) -> str:
    """'hbm', or 'xu=tensor' when two roofs tie (within 5 %)."""
    return "=".join(v.ties)


#: Above this many measured XU lanes per exponential, the XU share is said to be the pipe's.
XU_OCCUPANCY_NOTE = 1.1


def xu_per_exponential(v) -> float | None:
    """A kernel's (or a one-kernel algorithm's) measured XU lanes per exponential."""
    kernels = getattr(v, "kernels", (v,))
    return kernels[0].xu_per_exponential if len(kernels) == 1 else None


def _shares_text(v) -> str:
    """'xu 60%, tensor 59%, hbm 1%': the share of each roof's peak the kernel ran at; an XU
    share that counts more than the exponentials says so ('xu 5% (pipe: 2.8 XU lanes per
    exponential)')."""
    shares = sorted(v.roof_share.items(), key=lambda kv: -kv[1])
    per = xu_per_exponential(v)
    note = (
        f" (pipe: {per:.1f} XU lanes per exponential)"
        if per is not None and per > XU_OCCUPANCY_NOTE
        else ""
    )
    return ", ".join(
        f"{name} {share:.0%}" + (note if name == "xu" else "") for name, share in shares
    )


def _recompute_note(config) -> str:
    """What the useful FLOPs leave out of a training pass: what the fused backward rebuilds."""
    if config.deterministic:
        return "; the fused backward's recompute of S, and of S and dP in its dQ pass, not counted"
    return "; the fused backward's recompute of S not counted"


def print_roofs(e) -> None:
    """The roofs a verdict is read against, and the clock the compute roofs are quoted at."""
    print("  roofs: " + "; ".join(r.label for r in e.roofs.values()))
    if e.gpu.clock_hz and e.gpu.kind == "gpu":
        hz, source = fmt_si(e.gpu.clock_hz, "Hz", 4), e.gpu.clock_source
        if e.gpu.clock_measured:
            print(f"  clock: {hz}, measured ({source})")
        else:
            print(f"  clock: {hz}, not measured: {source}, a ceiling the clock does not "
                  "hold under load")  # fmt: skip


def print_explanation(e, source: str | None) -> None:
    print(f"{e.config.label()} on the {e.gpu.label} roofline")
    print_roofs(e)
    print_verdicts(e)
    print_ratios(e)
    print_flop_note(e.config, source)


def print_verdicts(e) -> None:
    """One row per algorithm (and per kernel where it has several): DRAM bytes and their
    source, useful FLOP per DRAM byte, the bound, the binding roof, the roofline and measured
    times, each roof's share. `main.py model` prints the same rows."""
    kw = max([10] + [len(k.name) for a in e.algorithms for k in a.kernels])
    print(
        f"  {'algorithm':<14} {'kernel':<{kw}} {'DRAM bytes':>10} {'source':<8} "
        f"{'FLOP/B':>9} {'bound':<8} {'roof':<12} {'roofline ms':>11} {'measured ms':>11}  "
        "share of each roof's peak"
    )
    for a in e.algorithms:
        rows = [(a.algorithm, "", a)] + [("", k.name, k) for k in a.kernels]
        if len(a.kernels) == 1:
            rows = rows[:1]
        for name, kernel, v in rows:
            intensity = v.intensity
            ai = "" if intensity is None else f"{intensity:,.1f}"
            bound = "tie" if v.tie and v.bound == "compute" else v.bound
            dram = fmt_bytes(v.dram_bytes if kernel else v.bytes)
            print(
                f"  {name:<14} {kernel:<{kw}} {dram:>10} "
                f"{v.bytes_source:<8} {ai:>9} {bound:<8} {_roof_text(v):<12} "
                f"{fmt_ms_column(v.roofline_ms):>11} {fmt_ms_column(v.measured_ms):>11}  "
                f"{_shares_text(v)}"
            )


def print_ratios(e) -> None:
    """Naive's DRAM bytes over each fused kernel's, and the model's check against counters."""
    for pair, ratio in e.naive_ratios.items():
        measured = "" if ratio["measured"] is None else f"measured {ratio['measured']:,.0f}×, "
        if ratio.get("model_over_measured") is not None:
            measured = (
                f"naive's model over the measured {pair.split('/')[1]} "
                f"{ratio['model_over_measured']:,.0f}×, "
            )
        print(
            f"  DRAM bytes {pair}: {measured}model {ratio['model_l2_aware']:,.0f}× (L2-aware), "
            f"{ratio['model_no_reuse']:,.1f}× (no reuse)"
        )
    for a in e.algorithms:
        check = a.model_over_measured
        if check is not None and not 0.8 <= check <= 1.25:
            model = fmt_bytes(a.model_bytes["l2_aware"])
            print(
                f"  model check, {a.algorithm}: the L2-aware model's {model} is {check:.2f}× "
                f"the {fmt_bytes(a.bytes)} the counters measured"
            )


def print_flop_note(config, source: str | None) -> None:
    """What FLOP/B counts and where the bytes come from."""
    useful = {
        "forward": "4·B·h·N²·d, halved when causal",
        "backward": "8·B·h·N²·d, halved when causal",
        "step": "12·B·h·N²·d, halved when causal",
        "decode": "4·B·h·q·N·d: q new tokens against N cached",
    }[config.pass_]
    print(
        f"  FLOP/B: useful FLOPs ({useful}"
        + (_recompute_note(config) if config.has_backward else "")
        + ") per DRAM byte; source: "
        "measured (hardware counters"
        + (f" in {source})" if source else ")")
        + " or model (the cost model's L2-aware estimate). Roofs within 5 % are a tie (a=b)."
    )
