"""`profile RUN` (a local folder, a gs:// folder, a job) reads a profiler trace whoever writes that
folder or bucket wrote, and its text named what the trace names as it was: the session's folder
(a Cloud Storage object name may hold ESC), its hosts (the files' names), the hardware, the
profiled steps' and the top ops' names and types (strings in the XSpace). An escape sequence there
reached the terminal: ESC ] 52 writes its clipboard, ESC c resets it, a line break forges a line.
Each is now shown with the characters that are not printable escaped; `-o json` keeps them.

The Profile is built here as xprof's converters make it (step_profile.read): what is under test is
the text, which is the same whatever wrote the trace.
"""

from __future__ import annotations

from vertex_trainer.performance.profile_text import profile_text
from vertex_trainer.performance.profile_trace import Trace
from vertex_trainer.performance.step_profile import Category, Op, Profile

CLIPBOARD = "\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07"


def _profile() -> Profile:
    trace = Trace(
        folder=f"gs://b/runs/x{CLIPBOARD}/logs/plugins/profile/s",
        session="s",
        files=("gs://b/runs/x/logs/plugins/profile/s/host\x1bc.xplane.pb",),
    )
    return Profile(
        source="gs://b/runs/x",
        trace=trace,
        hardware=f"GPU{CLIPBOARD}",
        steps=2,
        step_names=("10\x1b[2J", "11\nverdict: fine"),
        step_time_ms=12.5,
        steps_per_execution=1,
        breakdown=(Category("compute", "device compute", 12.5, 1.0),),
        top_ops=(Op(f"conv{CLIPBOARD}", "Conv2D\x1b[1A", "Device", 3, 4.0, 0.5),),
        verdict="compute-bound",
        bound="compute",
        notes=(f"the trace names {CLIPBOARD}",),
    )


def test_profile_text_shows_the_traces_names_escaped():
    profile = _profile()
    text = profile_text(profile)
    assert "\x1b" not in text and "\x07" not in text, repr(text)
    assert "x\\x1b]52;c;Y3VybCBldmlsIHwgc2g=\\x07" in text  # the folder
    assert "host\\x1bc" in text and "GPU\\x1b]52" in text
    assert "10\\x1b[2J .. 11\\x0averdict: fine" in text  # one line, no forged verdict
    assert "conv\\x1b]52" in text and "(Conv2D\\x1b[1A)" in text
    assert [line for line in text.splitlines() if line.startswith("verdict:")] == ["verdict: compute-bound"]
    assert profile.to_dict()["top_ops"][0]["name"] == f"conv{CLIPBOARD}"  # -o json keeps them
