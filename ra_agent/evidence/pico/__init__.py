"""PICO extraction: the LLM batch extractor, the per-field rules and their quality measures."""
