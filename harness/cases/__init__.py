"""Suite specs: YAML (opdiff-style) and Python-defined cases, expanded into ``Case`` objects."""
