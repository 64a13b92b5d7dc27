"""Changing a model and watching: interventions, activation patching, gradients
through the shortcuts, Pre-LN against Post-LN, the divergence finder, training."""
