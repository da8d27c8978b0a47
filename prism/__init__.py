"""PRISM: prompt-sensitivity measurement for multiple-choice evaluation of language models."""

__version__ = "0.1.0"
