"""calltap: record both legs of every LLM API request around a gateway and compare them by meaning."""

__version__ = "0.1.0"
