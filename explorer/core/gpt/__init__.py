"""GPT-2 itself: its config, layers and model (the book's code), the node table,
the tokenizer and the sizes of its parts."""
