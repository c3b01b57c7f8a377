"""`expengine models prepare`: export the ONNX encoder ahead of its first use (images, CI)."""

from __future__ import annotations

import typer

from .common import JSON_OPTION, app, emit_json, open_engine, stdout

models_app = typer.Typer(help="Prepare the local models.", no_args_is_help=True)
app.add_typer(models_app, name="models")


@models_app.command("prepare")
def prepare(
    ctx: typer.Context,
    int8: bool = typer.Option(
        False, "--int8", help="Also write the int8 model when the encoder is set to onnx (auto writes it anyway)."
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Export the encoder to ONNX from the installed weights, into the user cache, once (later runs reuse it)."""
    with open_engine(ctx) as engine:
        paths = engine.prepare_models(int8=int8)
    if as_json:
        emit_json({"onnx": paths})
    elif paths:
        for path in paths:
            stdout.print(path, markup=False, highlight=False)
    else:
        stdout.print("nothing to prepare: the configured encoder does not run on ONNX")
