"""The block graph's parts: layout, items, colours, canvas, the layer strip and
the node menu (the view itself is views/graph_view.py)."""
