"""Running a model: capturing every node, statistics, step-by-step generation,
batches, prompt passes and what is computed from them (GELU shares, the logit lens)."""
