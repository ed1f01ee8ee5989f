"""`borrowguard run -- COMMAND…` with real subprocesses: a threaded script, multiprocessing children,
uvicorn with two workers over real HTTP on 127.0.0.1, signals and exit codes."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import tokenizers
from packaging.version import Version

from borrowguard.run.launch import BOOTSTRAP_DIR, find_python, plan
from support.processes import stop_group

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
OLD_STACK = Version(tokenizers.__version__) < Version("0.23.1")
PY = sys.executable
BG = [PY, "-m", "borrowguard", "run"]
RACE_S = 3  # seconds of /race: the unguarded control and each guarded worker get the same
SCRIPT_S = 3  # seconds of race.py per mode: the unguarded control (it may stop early) and each guarded mode
CALL_ROUNDS = 3  # rounds of 160 concurrent /call requests: the unguarded control and the guarded server alike
NOTICE = re.compile(r"^borrowguard: guard installed \(transformers \S+, tokenizers \S+, pid (\d+)\)$", re.M)
GUARD_PROBE = "import transformers, borrowguard; print(borrowguard.is_installed())"


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BORROWGUARD_") and k != "PYTHONPATH"}
    env.update(extra)
    return env


def run(argv: list[str], timeout: float = 600, **kwargs) -> subprocess.CompletedProcess:
    # A hang bound, not a speed check: on a busy machine one Python importing transformers takes a minute.
    kwargs.setdefault("env", clean_env())
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kwargs)


def json_lines(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def assert_fails_as_this_stack_does(result: dict) -> None:
    if OLD_STACK:
        assert result["exceptions"].get("Already borrowed", 0) > 0, result
    else:
        leaked = sum(result["wrong_outputs"].values()) + result["exceptions"].get("Truncation error", 0)
        assert leaked > 0, result


# ------------------------------------------------------------------------------ the race, plain vs run


@pytest.mark.slow
def test_plain_script_and_its_spawn_child_fail():
    proc = run([PY, str(SCRIPTS / "race.py"), "--modes", "inline,spawn", "--seconds", str(SCRIPT_S)])
    assert proc.returncode == 0, proc.stderr
    results = json_lines(proc.stdout)
    assert [r["mode"] for r in results] == ["inline", "spawn"]
    for result in results:
        assert result["guarded"] is False
        assert_fails_as_this_stack_does(result)
    assert not NOTICE.search(proc.stderr)


@pytest.mark.slow
def test_run_guards_the_script_and_its_spawn_and_forkserver_children():
    # Each guarded mode gets the unguarded control's time (test_plain_script_and_its_spawn_child_fail).
    argv = [*BG, "--", PY, str(SCRIPTS / "race.py"), "--modes", "inline,spawn,forkserver", "--seconds", str(SCRIPT_S)]
    proc = run(argv)
    assert proc.returncode == 0, proc.stderr
    results = json_lines(proc.stdout)
    assert [r["mode"] for r in results] == ["inline", "spawn", "forkserver"]
    for result in results:
        assert result["guarded"] is True, result
        assert result["calls"] > 50 and result["overlapping"] > 0, result
        assert result["exceptions"] == {} and result["wrong_outputs"] == {}, result
    # One notice per guarded process, naming the processes that ran the race.
    noticed = {int(pid) for pid in NOTICE.findall(proc.stderr)}
    assert noticed == {r["pid"] for r in results}, proc.stderr
    assert len(noticed) == 3


# ----------------------------------------------------------------------------------------- uvicorn


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str, timeout: float = 30) -> dict:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.loads(response.read())


class Uvicorn:
    """uvicorn with N workers serving tests/scripts/tok_app.py, optionally under `borrowguard run`."""

    def __init__(self, tmp_path: Path, guarded: bool, workers: int) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.err_path = tmp_path / "uvicorn.err"
        argv = [PY, "-m", "uvicorn", "tok_app:app", "--app-dir", str(SCRIPTS), "--workers", str(workers),
                "--host", "127.0.0.1", "--port", str(self.port), "--log-level", "warning"]
        if guarded:
            argv = [*BG, "--", *argv]
        # A file, not a pipe: nobody must block on a full pipe.
        self.err = open(self.err_path, "w")  # noqa: SIM115 (closed in stop())
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=self.err, env=clean_env(),
                                     start_new_session=True)

    def wait_ready(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.err_path.read_text()
            try:
                get(self.base + "/health", timeout=2)
                return
            except OSError:
                time.sleep(0.3)
        raise AssertionError("uvicorn did not come up:\n" + self.err_path.read_text())

    def races(self, want_pids: int = 2, tries: int = 6) -> list[dict]:
        """/race results until `want_pids` workers answered: requests are staggered, and each /race blocks
        its worker's event loop, so the next connection goes to the other worker."""
        results: list[dict] = []
        with ThreadPoolExecutor(2) as pool:
            for _ in range(tries):
                # as long as the unguarded control's race (test_uvicorn_plain_fails: 3 s)
                first = pool.submit(get, self.base + f"/race?seconds={RACE_S}")
                time.sleep(0.3)
                second = pool.submit(get, self.base + f"/race?seconds={RACE_S}")
                results += [first.result(), second.result()]
                if len({r["pid"] for r in results}) >= want_pids:
                    break
        return results

    def stop(self) -> str:
        stop_group(self.proc)
        self.err.close()
        return self.err_path.read_text()


@pytest.fixture
def uvicorn_server(tmp_path):
    servers: list[Uvicorn] = []

    def start(guarded: bool, workers: int = 2) -> Uvicorn:
        server = Uvicorn(tmp_path, guarded, workers)
        servers.append(server)
        server.wait_ready()
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.mark.slow
def test_uvicorn_two_workers_under_run_serve_exact_results(uvicorn_server):
    server = uvicorn_server(guarded=True)
    races = server.races()
    assert len({r["pid"] for r in races}) == 2, races  # both workers answered
    for result in races:
        assert result["guarded"] is True
        assert result["calls"] > 20 and result["overlapping"] > 0, result
        assert result["exceptions"] == {} and result["wrong_outputs"] == {}, result

    # Serving: concurrent requests with mixed settings, each compared with this process's serial result
    # (test_uvicorn_plain_fails sends the same requests to an unguarded server: there they differ).
    wrong, sent = served_wrong(server)
    assert wrong == 0, f"{wrong} of {sent} served results differ from the serial reference"

    stderr = server.stop()
    assert len(set(NOTICE.findall(stderr))) == 2, stderr  # one notice per worker (the supervisor never
    assert {str(r["pid"]) for r in races} == set(NOTICE.findall(stderr))  # imports transformers)


@pytest.mark.slow
def test_uvicorn_plain_fails(uvicorn_server):
    server = uvicorn_server(guarded=False, workers=1)  # one worker is enough to show the race
    result = get(server.base + f"/race?seconds={RACE_S}")
    assert result["guarded"] is False
    assert_fails_as_this_stack_does(result)
    # The control of the guarded server's /call comparison: the same requests, unguarded, differ.
    wrong, sent = served_wrong(server)
    assert wrong > 0, f"all {sent} unguarded served results matched: the /call comparison proves nothing"


def served_wrong(server: Uvicorn) -> tuple[int, int]:
    """CALL_ROUNDS rounds of 160 /call requests from 16 threads: (results differing from the serial,
    unguarded reference computed in this process, requests sent)."""
    import random

    from transformers import AutoTokenizer

    from borrowguard.data import tokenizer_path
    from borrowguard.race import make_calls, reference

    sys.path.insert(0, str(SCRIPTS))
    try:
        import tok_app
    finally:
        sys.path.remove(str(SCRIPTS))
    import borrowguard

    assert not borrowguard.is_installed()
    tok = AutoTokenizer.from_pretrained(str(tokenizer_path()))
    calls = make_calls(tok, random.Random(tok_app.SEED), tok_app.N_CALLS)
    expected = [tok_app.digest(r) for r in reference(tok, calls)]
    indices = [i % len(calls) for i in range(160)] * CALL_ROUNDS
    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda i: get(f"{server.base}/call/{i}"), indices))
    return sum(a["digest"] != expected[i] for i, a in zip(indices, answers)), len(indices)


# ---------------------------------------------------------------------------- process behaviour


@pytest.mark.slow
@pytest.mark.parametrize(
    ("sig", "code", "said"), [(signal.SIGTERM, 42, "got SIGTERM"), (signal.SIGINT, 43, "got SIGINT")]
)
def test_signals_reach_the_command_and_its_exit_code_is_returned(sig, code, said):
    # A non-interactive shell starts background jobs with SIGINT ignored, and a Python started that way
    # installs no KeyboardInterrupt handler: give the command the disposition this test relies on.
    proc = subprocess.Popen([*BG, "--", PY, str(SCRIPTS / "signals.py")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=clean_env(),
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == code, err
    assert said in out


@pytest.mark.slow
def test_exit_code_and_stdio_are_the_commands_own():
    code = "import sys; print(sys.stdin.read().upper()); print('to stderr', file=sys.stderr); sys.exit(7)"
    proc = run([*BG, "--", PY, "-c", code], input="hello")
    assert proc.returncode == 7
    assert proc.stdout.strip() == "HELLO"
    assert proc.stderr.strip() == "to stderr"  # no notice: transformers was never imported


@pytest.mark.slow
def test_missing_and_unrunnable_executables(tmp_path):
    proc = run([*BG, "--", "borrowguard-no-such-command", "--flag"])
    assert proc.returncode == 127
    expected = "borrowguard: error: command not found: borrowguard-no-such-command (not on PATH)"
    assert proc.stderr.strip() == expected
    proc = run([*BG, "--", str(tmp_path / "missing.py")])
    assert proc.returncode == 127 and "command not found" in proc.stderr
    plain = tmp_path / "not-executable.sh"
    plain.write_text("#!/bin/sh\necho hi\n")
    proc = run([*BG, "--", str(plain)])
    assert proc.returncode == 126 and "not an executable file" in proc.stderr
    proc = run([*BG])
    assert proc.returncode == 2 and "nothing to run" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_non_python_command_warns_and_its_python_children_are_guarded():
    proc = run([*BG, "--", "sh", "-c", '"$0" -c "$1"; exit 3', PY, GUARD_PROBE])
    assert proc.returncode == 3
    assert "sh does not look like a Python program" in proc.stderr
    assert proc.stdout.strip() == "True"
    assert len(NOTICE.findall(proc.stderr)) == 1


@pytest.mark.slow
def test_python_without_transformers_warns_and_runs_unchanged(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([PY, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    child = str(venv / "bin" / "python")
    code = ("import sys; print('ok', 'borrowguard' in sys.modules, 'transformers' in sys.modules, "
            "any('.venv-' in p for p in sys.path))")
    proc = run([*BG, "--", child, "-c", code])
    assert proc.returncode == 0, proc.stderr
    assert f"transformers is not importable by {child}" in proc.stderr
    # Armed through our package loaded by path, without our site-packages on the child's sys.path.
    assert proc.stdout.split() == ["ok", "True", "False", "False"]
    assert "Traceback" not in proc.stderr and "guard not armed" not in proc.stderr


@pytest.mark.slow
def test_probing_for_transformers_does_not_disarm_the_guard():
    # Libraries test for transformers with find_spec long before they import it.
    code = "import importlib.util; assert importlib.util.find_spec('transformers'); " + GUARD_PROBE
    proc = run([*BG, "--quiet", "--", PY, "-c", code])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "True"


@pytest.mark.slow
def test_processes_that_never_import_transformers_pay_nothing():
    code = "import sys; print(sorted(m for m in ('transformers', 'tokenizers') if m in sys.modules))"
    proc = run([*BG, "--", PY, "-c", code])
    assert proc.returncode == 0 and proc.stdout.strip() == "[]"
    assert proc.stderr == ""


@pytest.mark.slow
def test_quiet_disable_and_an_existing_sitecustomize(tmp_path):
    own = tmp_path / "own"
    own.mkdir()
    (own / "sitecustomize.py").write_text("import builtins\nbuiltins.OWN_SITECUSTOMIZE = 'ran'\n")
    code = GUARD_PROBE + "; import builtins; print(getattr(builtins, 'OWN_SITECUSTOMIZE', 'missing'))"

    proc = run([*BG, "--quiet", "--", PY, "-c", code], env=clean_env(PYTHONPATH=str(own)))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["True", "ran"]  # guarded, and the user's sitecustomize still ran
    assert not NOTICE.search(proc.stderr)

    proc = run([*BG, "--", PY, "-c", code], env=clean_env(PYTHONPATH=str(own), BORROWGUARD_DISABLE="1"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "ran"]
    assert not NOTICE.search(proc.stderr)
    assert "BORROWGUARD_DISABLE is set" in proc.stderr


@pytest.mark.slow
def test_help_teaches():
    proc = run([*BG, "--help"])
    assert proc.returncode == 0
    for text in ("Examples:", "uvicorn app:app", "BORROWGUARD_DISABLE", "exit code", "127"):
        assert text in proc.stdout


# ------------------------------------------------------------------------------------- the plan


def test_plan_puts_the_bootstrap_first_once_and_keeps_the_users_path(tmp_path):
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": f"{tmp_path}{os.pathsep}{BOOTSTRAP_DIR}"}
    p = plan([PY, "-c", "pass"], environ=env, check_transformers=False)
    assert p.env["PYTHONPATH"].split(os.pathsep) == [str(tmp_path), str(BOOTSTRAP_DIR)]
    p = plan([PY], environ={"PATH": os.environ["PATH"]}, check_transformers=False)
    assert p.env["PYTHONPATH"] == str(BOOTSTRAP_DIR) and p.guarded and p.python == PY
    assert "PYTHONPATH" not in os.environ or str(BOOTSTRAP_DIR) not in os.environ["PYTHONPATH"]


def test_find_python_reads_shebangs(tmp_path):
    env = {"PATH": os.path.dirname(PY)}
    script = tmp_path / "tool"
    script.write_text(f"#!{PY}\nprint(1)\n")
    assert find_python(str(script), env) == PY
    script.write_text("#!/usr/bin/env -S python3 -u\n")
    assert find_python(str(script), env) == os.path.join(os.path.dirname(PY), "python3")
    script.write_text(f"#!/bin/sh\n'''exec' \"{PY}\" \"$0\" \"$@\"\n' '''\n")  # pip's long-path form
    assert find_python(str(script), env) == PY
    script.write_text("#!/bin/bash\necho hi\n")
    assert find_python(str(script), env) is None
    assert find_python("/usr/bin/python3.11", env) == "/usr/bin/python3.11"
