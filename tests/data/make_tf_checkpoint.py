"""Writes tests/data/openai-tf-tiny/: a small GPT-2 checkpoint in OpenAI's TensorFlow
format (the files the book's gpt_download.py saves as gpt2/124M/), saved by TensorFlow 1's
Saver. ``weights()`` (numpy only) gives every variable's value; the tests compare what
the explorer reads with it.

TensorFlow is NOT a dependency of the explorer: this script was run once, in a throwaway
virtual environment (`python -m venv /tmp/tf && /tmp/tf/bin/pip install tensorflow-cpu`,
TensorFlow 2.21.0), and its output is committed. The tests read the files without it.
"""

import json
import os
import sys

import numpy as np

# GPT-2's vocabulary (a model needs a row per tokenizer id), everything else tiny
HPARAMS = {"n_vocab": 50257, "n_ctx": 32, "n_embd": 8, "n_head": 2, "n_layer": 3}
SEED = 2019


def weights(hp=HPARAMS, seed=SEED) -> dict:
    """The variables of OpenAI's gpt-2 model.py, with its names and shapes, in the order
    they are created; non-trivial norms and biases, so that a wrong mapping shows."""
    rng = np.random.default_rng(seed)
    d = hp["n_embd"]
    out = {}

    def var(name, shape, scale, mean=0.0):
        out[name] = rng.normal(mean, scale, size=shape).astype(np.float32)

    var("model/wpe", [hp["n_ctx"], d], 0.02)
    var("model/wte", [hp["n_vocab"], d], 0.1)
    for i in range(hp["n_layer"]):
        h = f"model/h{i}"
        for ln in ("ln_1", "ln_2"):
            var(f"{h}/{ln}/g", [d], 0.1, mean=1.0)
            var(f"{h}/{ln}/b", [d], 0.05)
        var(f"{h}/attn/c_attn/w", [1, d, 3 * d], 0.2)
        var(f"{h}/attn/c_attn/b", [3 * d], 0.05)
        var(f"{h}/attn/c_proj/w", [1, d, d], 0.2)
        var(f"{h}/attn/c_proj/b", [d], 0.05)
        var(f"{h}/mlp/c_fc/w", [1, d, 4 * d], 0.2)
        var(f"{h}/mlp/c_fc/b", [4 * d], 0.05)
        var(f"{h}/mlp/c_proj/w", [1, 4 * d, d], 0.1)
        var(f"{h}/mlp/c_proj/b", [d], 0.05)
    var("model/ln_f/g", [d], 0.1, mean=1.0)
    var("model/ln_f/b", [d], 0.05)
    return out


def main(out_dir):
    import tensorflow as tf

    tf.compat.v1.disable_eager_execution()
    folder = os.path.join(out_dir, "openai-tf-tiny")
    os.makedirs(folder, exist_ok=True)
    values = weights()
    graph = tf.Graph()
    with graph.as_default():
        variables = {name: tf.compat.v1.get_variable(name, shape=v.shape, dtype=tf.float32)
                     for name, v in values.items()}  # 'model/h0/ln_1/g' -> the same scopes
        saver = tf.compat.v1.train.Saver()
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            for name, variable in variables.items():  # not as graph constants: a small .meta
                variable.load(values[name], sess)
            saver.save(sess, os.path.join(folder, "model.ckpt"))
    # as in OpenAI's folder: the checkpoint state names the files relative to it
    with open(os.path.join(folder, "checkpoint"), "w") as fh:
        fh.write('model_checkpoint_path: "model.ckpt"\nall_model_checkpoint_paths: "model.ckpt"\n')
    with open(os.path.join(folder, "hparams.json"), "w") as fh:
        json.dump(HPARAMS, fh, indent=2)
    # TensorFlow reads back what it was given (the book's loader calls the same functions)
    ckpt = tf.train.latest_checkpoint(folder)
    for name, _ in tf.train.list_variables(ckpt):
        assert np.array_equal(tf.train.load_variable(ckpt, name), values[name]), name
    print(f"wrote {folder} ({len(values)} variables)")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__)))
