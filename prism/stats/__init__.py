"""Statistics for comparisons, pure over numpy arrays and pandas frames.

``basics`` (paired bootstrap intervals, exact McNemar, Holm, Cohen's kappa, rates), ``shifts`` (change beyond
noise: between, within and excess), ``gee`` (the clustered GEE with its small-sample reference),
``gee_design`` (its design matrix) and ``gee_fits`` (which fits a comparison makes).
"""
