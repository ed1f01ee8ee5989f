"""Entry points through which servers activate borrowguard by themselves (vLLM's general plugins)."""
