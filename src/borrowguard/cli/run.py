"""`borrowguard run`: a thin click layer over borrowguard.run.launch."""

from __future__ import annotations

import sys

import click

from borrowguard.exit_codes import ExitCode
from borrowguard.run.launch import CommandNotFoundError, CommandNotRunnableError, execute, plan


@click.command(
    "run",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.option("-q", "--quiet", is_flag=True, help="No 'guard installed' line from each guarded process.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def run(quiet: bool, command: tuple[str, ...]) -> None:
    """Run COMMAND with the tokenizer guard in every Python process it starts.

    The guard is installed in the command's Python process and in every Python subprocess it spawns
    (multiprocessing spawn/forkserver children, uvicorn and gunicorn workers) as soon as that process
    imports transformers; processes that never do pay nothing. It works through a `sitecustomize`
    bootstrap put on the child's PYTHONPATH: nothing is installed or edited, and an existing
    sitecustomize still runs.

    COMMAND replaces borrowguard's process: signals reach it directly, its exit code is the exit code,
    stdin/stdout/stderr are its own. A missing executable exits 127.

    \b
    Examples:
      borrowguard run -- uvicorn app:app --workers 4 --host 127.0.0.1
      borrowguard run -- python -m sglang.launch_server --model-path /models/qwen
      borrowguard run -- gunicorn -k uvicorn.workers.UvicornWorker app:app
      borrowguard run --quiet -- python my_batch_job.py

    \b
    Environment:
      BORROWGUARD_DISABLE=1   run the command without the guard (also honoured by each child)
      BORROWGUARD_QUIET=1     same as --quiet
    """
    try:
        p = plan(command, quiet=quiet)
        for line in p.messages:
            click.echo(line, err=True)
        execute(p)
    except (CommandNotFoundError, CommandNotRunnableError) as exc:  # a shell's exit codes
        click.echo(f"borrowguard: error: {exc}", err=True)
        sys.exit(ExitCode.NOT_FOUND if isinstance(exc, CommandNotFoundError) else ExitCode.NOT_EXECUTABLE)
