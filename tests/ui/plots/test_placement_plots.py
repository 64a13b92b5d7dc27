"""The placements' plots: the loss drawn as a running mean of the steps that did not
diverge, aligned with the last step of each window."""

import numpy as np

from explorer.ui.plots.placement_plots import running_mean


def test_the_loss_is_drawn_as_a_running_mean_of_the_finite_steps():
    curve = [[s, float(s)] for s in range(1, 13)]
    curve[4][1] = None  # step 5 diverged
    drawn = running_mean(curve, n=3)
    steps = [1, 2, 3, 4, 6, 7, 8, 9, 10, 11, 12]
    assert drawn[:, 0].tolist() == steps[2:]
    np.testing.assert_allclose(drawn[:, 1], [np.mean(steps[i - 2:i + 1]) for i in range(2, len(steps))])
    assert running_mean(curve[:2], n=3).tolist() == [[1, 1.0], [2, 2.0]]  # too few: as they are
