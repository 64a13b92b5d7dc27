"""The values table stays lazy however large the tensor."""

import numpy as np
from explorer.ui.widgets.values_table import ValuesModel


def test_values_table_is_lazy_for_large_tensors():
    model = ValuesModel()
    matrix = np.arange(1024 * 3072, dtype=np.float32).reshape(1024, 3072)
    model.set_matrix(matrix, [str(i) for i in range(1024)])
    assert (model.rowCount(), model.columnCount()) == (1024, 3072)
    assert model.data(model.index(1023, 3071)) == f"{1024 * 3072 - 1:.4g}"
