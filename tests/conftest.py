import os

import pytest
import torch

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


@pytest.fixture(autouse=True)
def _deterministic():
    torch.manual_seed(1234)
    yield
