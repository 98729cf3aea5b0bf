"""What a new image takes from the handover its predecessor left (memoryd.runtime.reexec): a
malformed one is ignored and removed from the environment, a descriptor that is not a
listening socket of the expected kind is closed rather than served."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap

from memoryd.runtime.reexec import ENV, Handover, adopt, due, inherited_signals, take_handover
from tests.helpers import short_dir


def test_a_malformed_handover_is_ignored_and_not_passed_on():
    for raw in ("{not json", json.dumps({"unix": [3], "bogus": 1}), "[]",
                json.dumps({"unix": ["3"]}), json.dumps({"lock": -1}),
                json.dumps({"at": "yesterday"}), json.dumps({"reexecs": 1.5}),
                json.dumps({"signals": ["TERM"]})):
        env = {ENV: raw, "OTHER": "x"}
        assert take_handover(env) is None
        assert env == {"OTHER": "x"}
    assert take_handover({}) is None


def test_a_handover_is_read_once_and_its_descriptors_not_inherited_further():
    r, w = os.pipe()
    os.set_inheritable(r, True)
    try:
        env = {ENV: json.dumps({"lock": r, "reexecs": 2, "at": 1.5})}
        h = take_handover(env)
        assert h == Handover(lock=r, reexecs=2, at=1.5) and ENV not in env
        assert not os.get_inheritable(r)
    finally:
        os.close(r)
        os.close(w)


def test_only_a_listening_socket_of_the_family_asked_for_is_adopted():
    with short_dir() as d:
        listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listening.bind(str(d / "a.sock"))
        listening.listen()
        s = adopt(os.dup(listening.fileno()), socket.AF_UNIX)
        assert s is not None and s.getsockname() == str(d / "a.sock")
        s.close()
        fd = os.dup(listening.fileno())
        assert adopt(fd, socket.AF_INET, socket.AF_INET6) is None
        try:
            os.fstat(fd)
            raise AssertionError("the descriptor was left open")
        except OSError:
            pass
        listening.close()
        unbound = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # not listening
        assert adopt(os.dup(unbound.fileno()), socket.AF_UNIX) is None
        unbound.close()


def test_due_only_over_the_threshold_and_never_at_zero():
    assert due(50_000, 50_000) and not due(49_999, 50_000)
    assert not due(10**9, 0)


def test_held_signals_are_noted_on_any_thread_or_pending_in_the_main_one():
    """`hold_signals` from the old image's stop to its exec: a signal the kernel gives
    another thread is written to the handover's pipe by the C handler there, one left for
    the main thread stays pending (blocked) until `release_signals`; neither kills the
    process. In a child process, so the test's own signal state is left alone."""
    script = textwrap.dedent("""
        import os, signal, threading, time
        from memoryd.runtime.reexec import hold_signals, release_signals
        go = threading.Event()
        other = threading.Thread(target=go.wait)
        other.start()
        held = hold_signals()
        os.kill(os.getpid(), signal.SIGTERM)  # the main thread blocks it: the other gets it
        time.sleep(0.2)
        print(list(os.read(held.read_fd, 64)))
        go.set()
        other.join()
        # join() returns once the thread's Python part is done; the kernel's thread lives
        # on for a moment (1 in 100 here), and a signal sent then can be its to take
        deadline = time.monotonic() + 10
        while len(os.listdir("/proc/self/task")) > 1 and time.monotonic() < deadline:
            time.sleep(0.001)
        os.kill(os.getpid(), signal.SIGHUP)  # only the main thread is left: pending
        time.sleep(0.2)
        print(sorted(signal.sigpending()))
        release_signals(held)
        time.sleep(0.1)
        print(sorted(signal.sigpending()), signal.set_wakeup_fd(-1))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:3] == ["[15]", "[<Signals.SIGHUP: 1>]", "[] -1"]


def test_issue_11_a_signal_another_thread_takes_in_the_last_step_before_the_exec_is_kept():
    """The old image noted a signal in Python, in the main thread's next bytecode, and
    handed the list over just before `execv`: one a thread took after that note was lost
    (the re-exec test's SIGTERM, twice in a row on a loaded machine). Here the signal
    comes after the handover's last Python step (its JSON encoding, the stdlib's, wrapped)
    and is taken by another thread before the exec; the new image finds it in the pipe."""
    script = textwrap.dedent("""
        import json, os, select, signal, sys, threading
        from memoryd.runtime import reexec
        if os.environ.get(reexec.ENV):  # the new image
            h = reexec.take_handover(os.environ)
            print(reexec.inherited_signals(h), h.signal_fd, flush=True)
            sys.exit(0)
        threading.Thread(target=threading.Event().wait, daemon=True).start()
        held = reexec.hold_signals()
        encode = json.dumps
        def encode_then_signal(obj, *a, **k):
            text = encode(obj, *a, **k)
            os.kill(os.getpid(), signal.SIGHUP)  # blocked here: the other thread takes it
            select.select([held.read_fd], [], [], 10)  # its handler has run there
            return text
        reexec.json.dumps = encode_then_signal
        reexec.exec_self(reexec.Handover(reexecs=1), held)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "[1] None\n"


def test_a_handover_signal_fd_that_is_not_a_pipe_is_closed_unread():
    with short_dir() as d:
        (d / "f").write_bytes(b"\x0f\x0f")
        fd = os.open(d / "f", os.O_RDONLY)
        h = Handover(signals=[15, 99], signal_fd=fd)
        assert inherited_signals(h) == [15] and h.signal_fd is None
        try:
            os.fstat(fd)
            raise AssertionError("the descriptor was left open")
        except OSError:
            pass
