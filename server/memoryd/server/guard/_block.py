"""The prompt-ready block, as the guard presents it: rendered and hardened in ``.._block``."""

from .._block import BLOCK_FOOTER, BLOCK_HEADER, render_block

__all__ = ["BLOCK_FOOTER", "BLOCK_HEADER", "render_block"]
