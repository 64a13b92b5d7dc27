"""The explorer's model core: torch, tiktoken and numpy only. Never imports Qt."""
