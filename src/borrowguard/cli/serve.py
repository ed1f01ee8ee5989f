"""`borrowguard serve`: the bundled reference server (real front end, stub engine)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from borrowguard.errors import BorrowguardError, ConfigError, UserInputError
from borrowguard.server.config import DEFAULT_MODEL, DEFAULT_PORT, ServerConfig


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind. Anything but loopback exposes an unauthenticated server.")
@click.option("--port", type=int, default=DEFAULT_PORT, show_default=True, help="Port; 0 picks a free one.")
@click.option("--tokenizer", "tokenizer", type=click.Path(path_type=Path, file_okay=False),
              help="Local tokenizer directory (default: the bundled ChatML tokenizer).")
@click.option("--tokenizer-workers", "workers", type=int, default=4, show_default=True,
              help="Tokenization threads sharing the one tokenizer (plus one image thread).")
@click.option("--guard", type=click.Choice(["on", "off"]), default="on", show_default=True,
              help="Install borrowguard before loading the tokenizer; 'off' shows the failure.")
@click.option("--token-delay-ms", type=float, default=0.0, show_default=True,
              help="Stub decoding time per generated token.")
@click.option("--log-file", type=click.Path(path_type=Path, dir_okay=False),
              help="Also append the log (vLLM format) to this file.")
@click.option("--max-body-mb", type=float, default=20.0, show_default=True,
              help="Larger request bodies are answered 413.")
@click.option("--allow-remote-images", is_flag=True,
              help="Fetch http(s) image_url parts (default: data: URLs only).")
@click.option("--model", help=f"Served model name (default: {DEFAULT_MODEL}, or the --tokenizer dir name).")
def serve(host: str, port: int, tokenizer: Path | None, workers: int, guard: str, token_delay_ms: float,
          log_file: Path | None, max_body_mb: float, allow_remote_images: bool, model: str | None) -> None:
    """Start the bundled OpenAI-compatible server: real front end, STUB engine.

    The front end is the part that fails in production: chat template with tools, image_url decoding
    and <|image_pad|> expansion, and ONE tokenizer shared by a pool of tokenization threads and an
    image thread. The engine is a stub: deterministic replies, schema-valid tool calls, real token counts.

    Endpoints: POST /v1/chat/completions (stream or not), GET /v1/models, GET /health, GET /metrics,
    POST /tokenize. When it answers /health it prints one line:
    "borrowguard serve: listening on http://127.0.0.1:PORT (stub engine, guard on|off)".

    \b
    Examples:
      borrowguard serve                               # guarded, http://127.0.0.1:8000
      borrowguard serve --guard off --log-file s.log  # see "Already borrowed" under load
      borrowguard serve --port 0 --token-delay-ms 5   # free port, 5 ms per generated token
      borrowguard verify --url http://127.0.0.1:8000 --log s.log
    """
    if log_file is not None and not log_file.parent.is_dir():
        raise UserInputError(f"--log-file: directory {log_file.parent} does not exist")
    try:
        config = ServerConfig(host=host, port=port, tokenizer=tokenizer, workers=workers, guard=guard == "on",
                              token_delay_ms=token_delay_ms, log_file=log_file, max_body_mb=max_body_mb,
                              allow_remote_images=allow_remote_images, model=model,
                              setting_names={s: _flag(s) for s in ("allow_remote_images", "max_body_mb")})
    except ConfigError as exc:
        raise UserInputError(exc.said_as(_flag(exc.setting))) from None
    # Imported here: FastAPI, uvicorn and transformers are only needed once we really serve.
    from borrowguard.server.runner import serve as run_server

    def announce(line: str) -> None:
        click.echo(line)
        sys.stdout.flush()

    try:
        run_server(config, on_ready=announce)
    except ConfigError as exc:
        raise UserInputError(exc.said_as(_flag(exc.setting))) from None
    except UserInputError:
        raise
    except BorrowguardError as exc:
        click.echo(f"borrowguard: error: {exc}", err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        pass


def _flag(setting: str) -> str:
    """The option that sets a ServerConfig field (`workers` is --tokenizer-workers: it counts tokenizer threads)."""
    return "--tokenizer-workers" if setting == "workers" else "--" + setting.replace("_", "-")
