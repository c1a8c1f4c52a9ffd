"""servewatch: is this LLM deployment ready for real traffic?"""

__version__ = "0.1.0"
