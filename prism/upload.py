"""``python -m prism.upload OUTPUT_DIR``: send a run whose MLflow logging failed to MLflow (``prism.run.offline``)."""

from prism.run.offline import main

if __name__ == "__main__":
    main()
