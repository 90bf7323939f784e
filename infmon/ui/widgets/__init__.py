"""Small reusable widgets: the plotext chart wrapper."""
