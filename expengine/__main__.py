"""`python -m expengine` runs the CLI."""

from .cli import main

main()
