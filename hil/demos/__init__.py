"""Small runnable demonstrations (importable; no side effects on import)."""
