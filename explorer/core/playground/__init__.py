"""Generation as a playground: runs saved to a file and read back."""
