"""Trace phase codes have one definition, the enums of gpu/kernels/trace.cuh: the kernels write
them by name and Python reads the same header. No GPU needed."""

from __future__ import annotations

import re

import numpy as np
import pytest

from gpu.files import schema, trace
from gpu.launch import flash_ws, trace_phases
from gpu.launch.cuda_kernels import KERNEL_DIR

MARK = re.compile(r"\bTRACE_(?:SYNC_)?MARK\(([^;]*)\);")
MARK_IF = re.compile(r"\bTRACE_MARK_IF\(([^,]+),\s*([^;]*)\);")


def _marks(source: str) -> list[str]:
    """The phase argument of every TRACE_MARK / TRACE_SYNC_MARK / TRACE_MARK_IF call."""
    text = (KERNEL_DIR / source).read_text(encoding="utf-8")
    phases = [args.rsplit(",", 1)[0] for args in MARK.findall(text)]
    phases += [rest.rsplit(",", 1)[0] for _writer, rest in MARK_IF.findall(text)]
    return phases


def test_python_reads_the_block_codes_from_the_header():
    names = [p.name for p in trace_phases.BLOCK_PHASES]
    assert names == ["load_Q_i", "load_K_j", "compute_S_ij", "store_O_i", "end"]
    assert list(schema.PHASE_CODES) == names[:-1] and trace.END_CODE == 4


def test_python_reads_the_role_codes_and_their_meanings_from_the_header():
    assert tuple(p.name for p in trace_phases.ROLE_PHASES) == schema.ROLE_PHASES
    assert flash_ws.TRACE_CODES[5] == ("wait_K_j", "consumer: waiting for K_j (and V_{j-1})")
    assert sorted(flash_ws.TRACE_CODES) == list(range(len(schema.ROLE_PHASES)))
    assert trace_phases.ROLE_STRIDE == 256 and trace_phases.PRODUCER_ROLE == 0


@pytest.mark.parametrize("source", ["flash_readable.cu", "flash_mma.cu"])
def test_block_kernels_mark_every_phase_by_its_name(source):
    marks = _marks(source)
    assert marks and all(m.strip().startswith("BlockPhase::") for m in marks), marks
    used = {m.strip().removeprefix("BlockPhase::") for m in marks}
    assert used == {p.name for p in trace_phases.BLOCK_PHASES}


def test_the_warp_specialized_kernel_writes_role_words_by_name_never_bare_numbers():
    marks = _marks("flash_ws.cu")
    word = re.compile(r"role_word\((role|PRODUCER_ROLE), RolePhase::(\w+)\)")
    assert marks and all(word.fullmatch(m.strip()) for m in marks), marks
    used = {word.fullmatch(m.strip())[2] for m in marks}
    assert used == {p.name for p in trace_phases.ROLE_PHASES}
    assert "* 256" not in (KERNEL_DIR / "flash_ws.cu").read_text(encoding="utf-8")


def test_rows_decode_with_the_names_of_the_codes_the_kernel_wrote():
    stride = trace_phases.ROLE_STRIDE
    code = {p.name: p.code for p in trace_phases.ROLE_PHASES}
    rows = np.array(
        [
            [7, 3, 0 * stride + code["load_K_j"], 2, 100],
            [7, 3, 2 * stride + code["wait_PV"], 1, 150],
            [-1, -1, -1, -1, -1],
        ]
    )
    assert flash_ws.decode_trace_rows(rows) == [
        (7, 3, "producer", "load_K_j", 2, 100),
        (7, 3, "consumer 1", "wait_PV", 1, 150),
    ]


def test_a_header_whose_codes_skip_a_value_is_refused():
    text = "enum class RolePhase : int {\n    a = 0,  // first\n    b = 2,  // gap\n};"
    with pytest.raises(ValueError, match="0, 1, 2"):
        trace_phases.parse_enums(text)
    ok = "enum class X : int {\n    a = 0,  // first\n    b = 1,  // second\n};"
    assert [p.what for p in trace_phases.parse_enums(ok)["X"]] == ["first", "second"]
