"""GPT Block Explorer: see inside a GPT-2 model, one transformer block at a time."""

__version__ = "0.1.0"
