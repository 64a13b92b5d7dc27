"""Words and exercises: node explanations, formulas worked with real numbers,
the quiz, the forward trace and the code listing."""
