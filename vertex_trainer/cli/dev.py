"""dev: local stand-ins for Google Cloud services (tests and offline runs)."""

from __future__ import annotations

from typing import List, Optional

import typer
from typing_extensions import Annotated

from vertex_trainer.cli.common import stderr_line

app = typer.Typer(help="Local stand-ins for Google Cloud services (for tests and offline runs).",
                  no_args_is_help=True)


@app.command("fake-vertex")
def dev_fake_vertex(
    port: Annotated[int, typer.Option("--port", help="port to listen on (0: any free port)")] = 8765,
    host: Annotated[str, typer.Option("--host", help="address to listen on")] = "127.0.0.1",
) -> None:
    """Run a fake Vertex AI JobService (REST) for offline submit/status/cancel/list."""
    from vertex_trainer.emulators.vertex import serve

    serve(host, port)


@app.command("fake-logging")
def dev_fake_logging(
    port: Annotated[int, typer.Option("--port", help="port to listen on (0: any free port)")] = 8766,
    host: Annotated[str, typer.Option("--host", help="address to listen on")] = "127.0.0.1",
) -> None:
    """Run a fake Cloud Logging (entries:list, entries:write) for offline `logs` and `--wait`."""
    from vertex_trainer.emulators.logging import serve

    serve(host, port)


@app.command("gcs-emulator")
def dev_gcs_emulator(
    port: Annotated[int, typer.Option("--port", help="emulator port (STORAGE_EMULATOR_HOST)")] = 9023,
    proxy_port: Annotated[int, typer.Option("--proxy-port", help="TLS proxy port for TensorFlow's gs://")] = 9024,
    bucket: Annotated[Optional[List[str]], typer.Option(
        "--bucket", help="create this bucket at start (repeatable)", show_default=False)] = None,
) -> None:
    """Run a Cloud Storage emulator on 127.0.0.1 (in memory) and print the variables to export.

    With them exported, `submit --local`, `data synth` and TensorFlow read and write gs:// paths
    in the emulator (TF through a TLS proxy with a throwaway CA). Ctrl-C stops it; data is lost.
    """
    from vertex_trainer.emulators.gcs import serve_forever

    def show(exports: str) -> None:
        print(exports, flush=True)
        stderr_line("# Cloud Storage emulator running: export the lines above in the shell that "
                    "runs `submit --local` (or redirect them to a file and source it). Ctrl-C stops it.")

    serve_forever(port=port, proxy_port=proxy_port, buckets=tuple(bucket or ()), print_fn=show)
