"""Bad input and hostile text at the client: one-line errors, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.conftest import BIN, Musec


def test_broken_pipe_is_quiet(musec: Musec, buggy_repo: Path, fix_script: Path) -> None:
    run = musec("run", "--model", f"scripted:{fix_script}", "--approval", "auto", "--output-format", "json", "go", cwd=buggy_repo)
    sid = json.loads(run.stdout)["session_id"]
    proc = subprocess.run(f"{BIN / 'musec'} log {sid} --json | head -c 10", shell=True, env=musec.env,
                          capture_output=True, text=True, timeout=60)
    assert "Traceback" not in proc.stderr and len(proc.stdout) == 10


def test_task_that_is_not_utf8_is_accepted(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"turns": [[{"text": "ok"}]]}))
    proc = subprocess.run([os.fsencode(BIN / "musec"), b"run", b"--model", f"scripted:{script}".encode(),
                           b"--output-format", b"json", b"bad \xff task"], env=musec.env, cwd=buggy_repo,
                          capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    sid = json.loads(proc.stdout)["session_id"]
    events = [json.loads(x) for x in musec("log", sid, "--json").stdout.splitlines()]
    assert events[1]["text"] == "bad \ufffd task"


def test_terminal_escapes_in_model_text_are_not_printed(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"turns": [[{"text": "hi \x1b]0;pwned\x07 \x1b[2J there"}]]}))
    proc = musec("run", "--model", f"scripted:{script}", "\x1b[31mred title", cwd=buggy_repo)
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stdout and "\x07" not in proc.stdout and "there" in proc.stdout
    assert "\x1b" not in musec("sessions").stdout


def test_unusable_musec_home_is_a_clear_error(musec: Musec, tmp_path: Path) -> None:
    a_file = tmp_path / "f"
    a_file.write_text("x")
    proc = musec("sessions", env={"MUSEC_HOME": str(a_file)})
    assert proc.returncode == 5 and "set MUSEC_HOME to a writable directory" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_resume_with_a_model_is_taken_and_an_unknown_session_still_said(musec: Musec, buggy_repo: Path) -> None:
    """--resume with --model switches the model (tests/e2e/test_model_switch.py); a session
    that does not exist is said so, as without --model."""
    proc = musec("run", "--resume", "abc", "--model", "anthropic/claude-sonnet-4-6", cwd=buggy_repo)
    assert proc.returncode != 0 and "abc" in proc.stderr and "keeps its model" not in proc.stderr
    assert "Traceback" not in proc.stderr


def test_timed_out_command_says_so(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"turns": [[{"tool": "bash", "input": {"command": "sleep 30", "timeout_s": 1}}],
                                            [{"text": "ok"}]]}))
    proc = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "go", cwd=buggy_repo)
    assert proc.returncode == 0, proc.stderr
    assert "timed out" in proc.stdout


def test_gc_with_a_negative_age_says_what_it_takes(musec: Musec) -> None:
    for age in ("-5d", "nand", "infd"):
        proc = musec("gc", "--older-than", age)
        assert proc.returncode == 2 and proc.stderr.strip() == f"musec: --older-than takes an age like 30d, 12h or 90m, not {age!r}"


def test_musec_help_is_an_alias_of_help(musec: Musec) -> None:
    assert musec("help").stdout == musec("--help").stdout and musec("help").returncode == 0
    assert musec("help", "run").stdout == musec("run", "--help").stdout


def test_a_damaged_log_is_said_in_a_sentence_with_what_to_do(musec: Musec, buggy_repo: Path, fix_script: Path) -> None:
    # F19 (fresh-user trial s5): `musec replay` on a damaged log printed the bare word MISMATCH
    assert musec("run", "--model", f"scripted:{fix_script}", "--approval", "auto", "fix it", cwd=buggy_repo).returncode == 0
    sid = musec.json("sessions", "--all", "--json")[0]["id"]
    path = musec.home / "state" / "sessions" / f"{sid}.jsonl"
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"seq": 99, "ty')  # a crash cut the last write short
    verify = musec("log", "verify", sid)
    assert verify.returncode == 1 and f"`musec resume {sid}` cuts it off" in verify.stdout, verify.stdout
    lines = whole.split(b"\n")
    lines[2] = lines[2].replace(b'"', b"'", 1)
    path.write_bytes(b"\n".join(lines))
    replay = musec("replay", sid)
    assert replay.returncode == 1 and "MISMATCH" not in replay.stdout, replay.stdout
    assert replay.stdout.startswith(f"{sid}: the log is damaged, so nothing was replayed (") and "seq 2" in replay.stdout
    assert f"`musec log verify {sid}` says what changed" in replay.stdout and "digest" not in replay.stdout
    assert json.loads(musec("replay", sid, "--json").stdout)["damaged"] is True
    verify = musec("log", "verify", sid)
    assert verify.returncode == 1 and f"the log was changed after it was written: `musec log {sid}`" in verify.stdout


def test_a_log_changed_after_it_was_written_is_never_shown_or_replayed_as_logged(
        musec: Musec, buggy_repo: Path, fix_script: Path) -> None:
    # fresh-user trial s7: with a line edited (still valid JSON) or two lines swapped, `musec
    # log verify` failed but `musec log` printed the forged text with exit 0 and `musec
    # replay` said every request was re-derived byte for byte
    assert musec("run", "--model", f"scripted:{fix_script}", "--approval", "auto", "fix it", cwd=buggy_repo).returncode == 0
    sid = musec.json("sessions", "--all", "--json")[0]["id"]
    path = musec.home / "state" / "sessions" / f"{sid}.jsonl"
    whole = path.read_bytes()
    lines = whole.split(b"\n")
    forged = [i for i, line in enumerate(lines) if b'"fix it"' in line][0]
    for bad, changed in ((forged, lines[:forged] + [lines[forged].replace(b'"fix it"', b'"fix IT"')] + lines[forged + 1:]),
                         (3, lines[:3] + [lines[4], lines[3]] + lines[5:])):
        path.write_bytes(b"\n".join(changed))
        log = musec("log", sid)
        assert log.returncode == 1 and "fix IT" not in log.stdout, log.stdout
        assert f"seq {bad}: hash chain broken" in log.stderr and f"musec log verify {sid}" in log.stderr, log.stderr
        assert len(log.stdout.splitlines()) == bad  # the lines before the changed one
        assert b"fix IT" not in musec("log", sid, "--json").stdout.encode()
        replay = musec("replay", sid)
        assert replay.returncode == 1 and "the log is damaged, so nothing was replayed" in replay.stdout, replay.stdout
    path.write_bytes(whole)
    assert musec("log", sid).returncode == 0 and musec("replay", sid).returncode == 0
