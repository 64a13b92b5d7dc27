"""Weights from files and the Hub: every checkpoint format, the key maps between
them, OpenAI's TensorFlow bundle, the Hugging Face cache and downloads."""
