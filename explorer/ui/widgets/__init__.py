"""Small widgets the views share: job controls, covers, scrolling, the
generation box, value tables, the enlarged view."""
