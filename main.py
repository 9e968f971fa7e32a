"""Tilescope entry point: the desktop app by default, plus headless `model`, `bench`, `explain`
and `render`.

    python main.py                      the desktop app
    python main.py --open results.json  the app, showing a recorded run or saved session
    python main.py model --seq N [...]  the cost model's figures (--json for one JSON object)
    python main.py bench [...]          measure algorithms over sequence lengths
    python main.py explain --seq N [...] roofline verdicts (measured where a recording has them)
    python main.py render --seq N --out shot.png   headless screenshot of the window

This file only dispatches: the grammar and the Qt-free commands live in gpu/cli/, `explain` in
app/measure/ (it prints the window's own figures), `render` in app/export/. Every error reaches
the user as one line without a traceback (gpu.cli.errors.report_error): bad flags, values or
files exit with status 2, a failed check or a failed run with status 1. An error nobody
expected also gets one line, plus a hint: TILESCOPE_DEBUG=1 prints its traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from gpu import exit_status

if __name__ == "__main__":  # first: a signal from the very start ends the program its way
    exit_status.install()

from gpu.cli.arguments import refuse_bare_double_dash_values
from gpu.cli.errors import EXIT_INTERRUPTED, reader_gone, report_error
from gpu.cli.parser import build_parser
from gpu.files.fileio import remove_partial_files, remove_partial_files_on_signals


def _run_command(args) -> int:  # type: ignore[no-untyped-def]
    """The subcommand's work, each imported only when asked for."""
    if args.command == "model":
        from gpu.cli.model import cmd_model

        return cmd_model(args)
    if args.command == "bench":
        from gpu.cli.bench import cmd_bench

        return cmd_bench(args)
    if args.command == "render":
        from app.render_command import cmd_render

        return cmd_render(args)
    from app.measure.explain_command import cmd_explain

    return cmd_explain(args)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        refuse_bare_double_dash_values(argv)
        args = parser.parse_args(argv)
        exit_status.check()  # a signal came during the start
        if args.command is not None:
            remove_partial_files_on_signals()  # a signal mid-write leaves no .part file
            return _run_command(args)
    except KeyboardInterrupt:
        print("tilescope: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return reader_gone()
    except Exception as exc:
        return report_error(exc)
    try:
        from app.launch import run_gui

        return run_gui(open_path=args.open)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception as exc:  # the app could not start: one line, like every other error
        return report_error(exc)


def run(argv: Sequence[str] | None = None) -> int:
    """The process: its ending signals (gpu.exit_status, with the hook that runs last), then
    `main`; the exit status."""
    exit_status.install(remove_partial_files)
    status = main(argv)
    exit_status.shutting_down(status)
    return status


if __name__ == "__main__":
    sys.exit(run())
