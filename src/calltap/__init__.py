"""calltap: record both legs of each LLM API request around a gateway; compare them by meaning."""

__version__ = "0.1.0"
