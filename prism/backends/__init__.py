"""Model backends, found by name and imported lazily (see ``prism.backends.base``)."""
