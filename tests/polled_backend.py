"""A CPU backend that records every poll of a run's cancel hook, so a test can say how much work
a run did after it was told to stop: counted in tiles (one poll each), not in seconds."""

from __future__ import annotations

from dataclasses import replace

from gpu.config import AttentionConfig


class PolledCpuBackend:
    """The CPU backend, with every poll of a run's cancel hook recorded as (config, answer):
    how much work a run did after it was told to stop, counted in the tiles between polls."""

    def __init__(self) -> None:
        from gpu.backends.cpu_backend import CpuBackend

        self.inner = CpuBackend()
        self.polls: list[tuple[AttentionConfig, bool]] = []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def run(self, config, algorithm, options):
        hook = options.cancel

        def polled() -> bool:
            answer = bool(hook is not None and hook())
            self.polls.append((config, answer))
            return answer

        return self.inner.run(config, algorithm, replace(options, cancel=polled))

    def polls_of(self, config: AttentionConfig, since: int = 0) -> list[bool]:
        return [answer for c, answer in self.polls[since:] if c == config]

    def into_the_tiles(self, qtbot, config: AttentionConfig, polls: int = 3) -> None:
        """Wait until the run of `config` is past making its inputs (not cancellable) and has
        polled its hook `polls` times (the wait's bound only guards against a hang)."""
        qtbot.waitUntil(lambda: len(self.polls_of(config)) >= polls, timeout=60_000)

    def stopped_at_its_next_poll(self, config: AttentionConfig, since: int) -> bool:
        """Whether the run of `config`, told to stop after poll `since`, stopped at the next
        poll of its hook (a poll already under way when the stop came may still say no)."""
        after = self.polls_of(config, since)
        return bool(after) and after[-1] is True and after.count(False) <= 1

    def count_polls_at(
        self, runner: object, methods: tuple[str, ...], monkeypatch
    ) -> list[tuple[int, AttentionConfig | None]]:
        """(polls made so far, the config asked for or None) each time one of the runner's
        `methods` is called: the moments a run can be told to stop."""
        told: list[tuple[int, AttentionConfig | None]] = []
        for name in methods:
            original = getattr(runner, name)

            def counted(*args, _original=original, **kwargs):
                told.append((len(self.polls), args[0] if args else None))
                return _original(*args, **kwargs)

            monkeypatch.setattr(runner, name, counted)
        return told

    @staticmethod
    def told_to_stop(
        config: AttentionConfig, told: list[tuple[int, AttentionConfig | None]]
    ) -> int:
        """The poll count when a run of `config` was first told of newer work: the first call
        after the last that asked for `config` which asks for something else (or for nothing)."""
        asked = max((i for i, (_, c) in enumerate(told) if c == config), default=-1)
        return next(count for count, c in told[asked + 1 :] if c != config)
