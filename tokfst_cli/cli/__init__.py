"""The ``tokfst`` command line: thin typer modules over the library core."""
