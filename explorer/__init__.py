"""GPT Block Explorer: see inside a GPT-2 model and the blocks that followed it (Llama,
Qwen), one transformer block at a time."""

__version__ = "0.1.0"
