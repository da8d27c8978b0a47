"""PRISM's Hydra config tree, shipped inside the package so an installed PRISM finds it (``pkg://prism.conf``)."""
