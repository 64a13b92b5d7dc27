"""Plots: axes with whole-number ticks, text that fits, histograms and the
figures saved by the command line."""
