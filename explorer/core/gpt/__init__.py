"""The blocks themselves: each family's record and node table (families/), the record's
type (family.py), the config and its presets, the models as the book writes them (GPT-2:
layers.py and model.py; the Llama / Qwen block: llama.py) and the one factory for any of
them (build.py), the model interface they share (block_model.py), the node table's
functions (nodes.py), the tokenizer, the hooks, and the sizes of a model's parts."""
