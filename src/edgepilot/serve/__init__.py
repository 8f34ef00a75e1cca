"""`edgepilot serve`: an OpenAI-compatible server that stays up on a phone and stays private."""
