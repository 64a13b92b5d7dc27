"""What every part stands on: errors, checks at the boundaries, cancellation,
devices and memory, output files, the state folder, bundled resources."""
