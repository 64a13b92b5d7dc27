"""The dtypes a model runs in, by every name accepted; torch-free, so that the command
line's parser can list them without importing torch (core/base/devices.py maps them to
torch's dtypes)."""

DTYPE_NAMES = {"float32": "float32", "fp32": "float32", "bfloat16": "bfloat16",
               "bf16": "bfloat16", "float16": "float16", "fp16": "float16"}
