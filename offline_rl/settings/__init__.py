"""Configuration, one typed section per builder method of ``AlgorithmConfig``: each option is
declared once, with its type, default, documentation and check (see ``options``)."""
