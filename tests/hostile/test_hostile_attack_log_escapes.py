"""A job's log is what its code printed about its data, and in the cloud it is another machine's
output: `logs` and `submit/status --wait` print it on your terminal. Escape sequences in it set the
window title, write your clipboard (OSC 52: a command pasted later), clear the screen or move the
cursor over earlier lines (a failure hidden). Each control character is shown as `\\xNN`, not sent;
colours (SGR) and tabs stay, the text around them is unchanged."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

from tests.cli_support import edge_env
from tests.shared import cli_runner
from vertex_trainer.contract import Failure, LogEntry
from vertex_trainer.present import logs

DATA = Path(__file__).resolve().parents[1] / "report" / "data"
CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4K\x07"  # OSC 52: the clipboard gets `rm -rf ~`
TITLE = "\x1b]0;sudo password?\x1b\\"
HIDE = "\x1b[1A\x1b[2K\x1b[2J\r\x08\x9b1A"  # cursor up, erase line and screen, CR, BS, C1 CSI
LINE = f"epoch 1 label={CLIPBOARD}{TITLE}cat {HIDE}done \x1b[32mok\x1b[0m\tloss 0.5"
SHOWN = (
    "epoch 1 label=\\x1b]52;c;cm0gLXJmIH4K\\x07\\x1b]0;sudo password?\\x1b\\cat "
    "\\x1b[1A\\x1b[2K\\x1b[2J\\x0d\\x08\\x9b1Adone \x1b[32mok\x1b[0m\tloss 0.5"
)


def _sent(text: str) -> str:
    """`text` without its colours: what remains must hold no control character but a tab/newline."""
    return text.replace("\x1b[32m", "").replace("\x1b[0m", "")


def _no_control(text: str) -> None:
    bad = [c for c in _sent(text) if (ord(c) < 32 and c not in "\t\n") or 0x7F <= ord(c) <= 0x9F]
    assert bad == [], repr(text)


def test_logs_lines_show_control_characters_instead_of_sending_them():
    entry = LogEntry("2026-12-01T00:00:00Z", "workerpool0-0", f"{LINE}\nplain line\r")
    lines = list(logs.entry_lines(entry))
    assert lines == [f"[workerpool0-0] {SHOWN}", "[workerpool0-0] plain line"]
    for line in lines:
        _no_control(line)


def test_wait_view_shows_them_in_lines_and_in_the_failure():
    from rich.console import Console

    out = io.StringIO()

    class _Job:
        id = "123"

    view = logs.FollowView(Console(file=out, width=400, force_terminal=False), _Job())
    with view:
        view.show(LogEntry("t", "workerpool0-0", LINE))
        view.failure(Failure("boom", "workerpool0-0", (f"Traceback {CLIPBOARD}", HIDE)))
    text = out.getvalue()
    _no_control(text)
    first = text.splitlines()[0]  # (rich expands the tab)
    assert first.startswith(f"workerpool0-0 | {SHOWN.split(chr(9))[0]}") and first.endswith(" loss 0.5")
    assert "  Traceback \\x1b]52;c;cm0gLXJmIH4K\\x07" in text.splitlines()


def test_the_logs_command_on_a_run_whose_log_holds_escapes(tmp_path):
    shutil.copytree(DATA, tmp_path / "data")
    run = tmp_path / "data" / "quickstart"
    log = tmp_path / "data" / ".vertex-trainer" / "quickstart" / "logs" / "workerpool0-0.log"
    with log.open("a", encoding="utf-8", newline="") as f:  # (a CR in the file ends a line there)
        f.write(f"2026-12-02T04:05:05.000000Z {LINE.replace(chr(13), '')}\n")
    result = cli_runner(edge_env(tmp_path), cwd=tmp_path)("logs", run)
    assert result.returncode == 0, result.stderr
    _no_control(result.stdout)
    assert result.stdout.splitlines()[-1] == "[workerpool0-0] " + SHOWN.replace("\\x0d", "")
