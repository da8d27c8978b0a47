"""``python -m prism.upload OUTPUT_DIR``: send a run whose MLflow logging failed to MLflow (see ``prism.offline``)."""

from prism.offline import main

if __name__ == "__main__":
    main()
