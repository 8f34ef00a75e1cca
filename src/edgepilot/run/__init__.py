"""`edgepilot run`: plan settings, load the model, stream a completion, report speeds and peak memory."""
