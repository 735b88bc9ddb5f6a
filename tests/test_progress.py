"""pipeline/progress.py: what a stage prints while it works."""
from __future__ import annotations

import io

import pytest

from pipeline import progress


def test_plain_lines_report_every_tenth_and_the_end_with_time_left():
    out = io.StringIO()
    bar = progress.PlainLines(100, "train cora/cadnet", "seeds", file=out)
    for _ in range(4):
        bar.update(25)  # one chunk of 25 seeds at a time: one line per chunk
    lines = out.getvalue().splitlines()
    assert lines[0] == "train cora/cadnet: 100 seeds to go"
    assert [line.split(": ")[1].split(" (")[0] for line in lines[1:]] == ["25/100 seeds", "50/100 seeds",
                                                                          "75/100 seeds", "100/100 seeds"]
    assert all("elapsed" in line and "left" in line for line in lines[1:])
    assert "\r" not in out.getvalue() and "\x1b" not in out.getvalue()


def test_plain_lines_stay_few_for_many_small_updates():
    out = io.StringIO()
    bar = progress.PlainLines(1000, "x", "seeds", file=out)
    for _ in range(1000):
        bar.update()
    assert len(out.getvalue().splitlines()) == 1 + 100 // progress.PLAIN_EVERY_PERCENT


def test_off_a_terminal_a_short_inner_loop_is_silent_and_outer_ones_plain(monkeypatch, capsys):
    monkeypatch.setattr(progress, "on_terminal", lambda: False)
    inner = progress.inner(100, "epochs", "epoch")
    inner.update()
    inner.set_postfix(active=3)
    assert capsys.readouterr().err == ""  # well under HEARTBEAT_SECONDS
    assert isinstance(inner, progress.Heartbeat)
    assert isinstance(progress.outer(10, "train", "seeds"), progress.PlainLines)


def test_a_long_inner_loop_says_where_it_is_once_per_heartbeat():
    """A chunk of seeds can run for an hour inside one loop: it still says where it is, once per interval."""
    now = [0.0]
    out = io.StringIO()
    beat = progress.Heartbeat(1000, "  seeds 0-19", "epoch", seconds=60, file=out, clock=lambda: now[0])
    for epoch in range(1, 301):
        now[0] = epoch * 1.0  # one second per epoch: a line at 60, 120, ..., 300 s
        beat.set_postfix(active=20)
        beat.update()
    lines = out.getvalue().splitlines()
    assert lines[0] == "  seeds 0-19: epoch 60 of at most 1000, 60 s elapsed, active 20"
    assert [line.split(",")[0] for line in lines] == [f"  seeds 0-19: epoch {e} of at most 1000" for e in (60, 120, 180, 240, 300)]
    assert "\r" not in out.getvalue()


@pytest.mark.parametrize("seconds, text", [(42, "42 s"), (210, "3.5 min"), (7560, "2.1 h"), (4 * 86400, "4.0 days")])
def test_duration(seconds, text):
    assert progress.duration(seconds) == text


def test_a_stage_whose_stderr_is_not_a_terminal_prints_plain_lines(capsys):
    """Under pytest's capture (as under DVC, or `> log`), stderr is no terminal."""
    assert not progress.on_terminal()
    bar = progress.outer(4, "train cora/cadnet", "seeds")
    bar.update(4)
    err = capsys.readouterr().err
    assert isinstance(bar, progress.PlainLines) and "\r" not in err and "4/4 seeds (100%)" in err
