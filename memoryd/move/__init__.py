"""Moving a history between stores: `python -m memoryd.move` (`memoryctl store migrate`)."""
