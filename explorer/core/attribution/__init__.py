"""Why this token: direct logit attribution, head roles, the layer table."""
