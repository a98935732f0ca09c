"""``otel-ctx demo --forever`` stops on SIGTERM and Ctrl-C from a handler that takes no lock."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from otel_ctx.cli._demo_command import _Stop, _stop_signals


def test_a_signal_ends_the_wait_for_the_next_ticket_within_a_tick() -> None:
    stop = _Stop()
    before = signal.getsignal(signal.SIGTERM)
    with _stop_signals(stop):
        assert signal.getsignal(signal.SIGTERM) is not before  # the demo's handler is in place
        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM)).start()
        started = time.monotonic()
        stop.wait(30)
        waited = time.monotonic() - started
    assert stop.asked
    assert waited < 10  # the 30 s wait ended at the signal, not at its end
    assert signal.getsignal(signal.SIGTERM) is before  # the previous handler is back


def test_a_second_ctrl_c_aborts() -> None:
    stop = _Stop()
    with _stop_signals(stop):
        os.kill(os.getpid(), signal.SIGINT)
        stop.wait(1)
        assert stop.asked  # the first one asks for a stop
        with pytest.raises(KeyboardInterrupt):  # the handler raises at the next bytecode
            os.kill(os.getpid(), signal.SIGINT)


def test_a_wait_with_no_stop_lasts_its_time() -> None:
    stop = _Stop()
    started = time.monotonic()
    stop.wait(0.2)
    assert time.monotonic() - started >= 0.2
    assert not stop.asked
