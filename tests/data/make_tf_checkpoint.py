"""Writes tests/data/openai-tf-tiny/: a small GPT-2 checkpoint in OpenAI's TensorFlow
format (the files the book's gpt_download.py saves as gpt2/124M/), saved by TensorFlow 1's
Saver, and openai-tf-tiny.npz with every variable's value as TensorFlow reads it back.

TensorFlow is NOT a dependency of the explorer: this script was run once, in a throwaway
virtual environment (`python -m venv /tmp/tf && /tmp/tf/bin/pip install tensorflow-cpu`,
TensorFlow 2.21.0), and its output is committed. The tests read the files without it.
"""

import json
import os
import sys

import numpy as np
import tensorflow as tf

HPARAMS = {"n_vocab": 512, "n_ctx": 32, "n_embd": 32, "n_head": 4, "n_layer": 3}


def build(hp, rng):
    """The variables of OpenAI's gpt-2 model.py, with its names and shapes."""
    v1 = tf.compat.v1
    n, d = hp["n_layer"], hp["n_embd"]

    values = {}

    def var(name, shape, scale=0.1, mean=0.0):
        variable = v1.get_variable(name, shape=shape, dtype=tf.float32)
        values[variable] = rng.normal(mean, scale, size=shape).astype(np.float32)

    with v1.variable_scope("model"):
        var("wpe", [hp["n_ctx"], d], 0.02)
        var("wte", [hp["n_vocab"], d], 0.1)
        for i in range(n):
            with v1.variable_scope(f"h{i}"):
                for ln in ("ln_1", "ln_2"):
                    with v1.variable_scope(ln):
                        var("g", [d], 0.1, mean=1.0)
                        var("b", [d], 0.05)
                with v1.variable_scope("attn"):
                    with v1.variable_scope("c_attn"):
                        var("w", [1, d, 3 * d], 0.2)
                        var("b", [3 * d], 0.05)
                    with v1.variable_scope("c_proj"):
                        var("w", [1, d, d], 0.2)
                        var("b", [d], 0.05)
                with v1.variable_scope("mlp"):
                    with v1.variable_scope("c_fc"):
                        var("w", [1, d, 4 * d], 0.2)
                        var("b", [4 * d], 0.05)
                    with v1.variable_scope("c_proj"):
                        var("w", [1, 4 * d, d], 0.1)
                        var("b", [d], 0.05)
        with v1.variable_scope("ln_f"):
            var("g", [d], 0.1, mean=1.0)
            var("b", [d], 0.05)
    return values


def main(out_dir):
    tf.compat.v1.disable_eager_execution()
    folder = os.path.join(out_dir, "openai-tf-tiny")
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(2019)
    graph = tf.Graph()
    with graph.as_default():
        values = build(HPARAMS, rng)
        saver = tf.compat.v1.train.Saver()
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            for variable, value in values.items():  # not as graph constants: a small .meta
                variable.load(value, sess)
            saver.save(sess, os.path.join(folder, "model.ckpt"))
    # as in OpenAI's folder: the checkpoint state names the files relative to it
    with open(os.path.join(folder, "checkpoint"), "w") as fh:
        fh.write('model_checkpoint_path: "model.ckpt"\nall_model_checkpoint_paths: "model.ckpt"\n')
    with open(os.path.join(folder, "hparams.json"), "w") as fh:
        json.dump(HPARAMS, fh, indent=2)
    # The values as TensorFlow reads them back: the book's load_gpt2_params_from_tf_ckpt
    # uses tf.train.list_variables and tf.train.load_variable the same way.
    ckpt = tf.train.latest_checkpoint(folder)
    values = {name: tf.train.load_variable(ckpt, name) for name, _ in tf.train.list_variables(ckpt)}
    np.savez(os.path.join(out_dir, "openai-tf-tiny.npz"), **values)
    print(f"wrote {folder} ({len(values)} variables)")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__)))
