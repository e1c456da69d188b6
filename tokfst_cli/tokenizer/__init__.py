"""The tokenizer: a neutral model of a Hugging Face tokenizer.json, and Hugging Face itself as the oracle."""

from tokfst_cli import compat

__getattr__ = compat.forward(__name__, "model")  # release 0.1's tokfst_cli.tokenizer.load & co., with a warning
