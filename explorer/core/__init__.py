"""The explorer's model core: torch, numpy, tiktoken, tokenizers, safetensors and
huggingface_hub — never Qt. The block families (gpt/families/) describe every model it
opens; the layers above ask them, not which family a model is."""
