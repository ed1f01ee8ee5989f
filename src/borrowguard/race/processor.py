"""A Qwen2-VL-style multimodal processor assembled locally (nothing downloaded), for processor workloads.

Imports transformers at import time: import this module only where a processor is wanted
(`borrowguard.race.make_processor` does so lazily). Pillow is needed to call the processor on images.
"""

from __future__ import annotations

from typing import Any, ClassVar

from transformers import Qwen2VLProcessor
from transformers.processing_utils import ProcessorMixin

from borrowguard.race.calls import IMAGE_TOKEN

__all__ = ["Qwen2VLImageOnlyProcessor", "make_processor"]


class Qwen2VLImageOnlyProcessor(Qwen2VLProcessor):
    """Qwen2VLProcessor without its video part, for environments without torchvision.

    It tokenizes images exactly as Qwen2-VL does (`self.tokenizer(text, **text_kwargs)` after expanding
    <|image_pad|>), which is the path that races in servers.
    """

    attributes: ClassVar[list[str]] = ["image_processor", "tokenizer"]  # transformers 4.x reads this

    def __init__(self, image_processor: Any = None, tokenizer: Any = None, chat_template: Any = None):
        # What Qwen2VLProcessor.__init__ sets, minus the video processor it would insist on.
        self.image_token = getattr(tokenizer, "image_token", IMAGE_TOKEN)
        self.video_token = getattr(tokenizer, "video_token", "<|video_pad|>")
        self.image_token_id = tokenizer.convert_tokens_to_ids(self.image_token)
        self.video_token_id = tokenizer.convert_tokens_to_ids(self.video_token)
        ProcessorMixin.__init__(self, image_processor, tokenizer, chat_template=chat_template)


def make_processor(tokenizer: Any) -> Any:
    """A Qwen2-VL-style multimodal processor around `tokenizer`.

    `Qwen2VLProcessor` itself when a video processor can be built (needs torchvision); otherwise
    `Qwen2VLImageOnlyProcessor`. The tokenizer must know the Qwen2-VL image tokens (the bundled ChatML
    tokenizer does).
    """
    if tokenizer.convert_tokens_to_ids(IMAGE_TOKEN) in (None, tokenizer.unk_token_id):
        raise ValueError(f"the tokenizer has no {IMAGE_TOKEN} token: not a Qwen2-VL-style tokenizer")
    try:  # transformers 5.x: the PIL backend, without the torchvision fallback warning
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
            Qwen2VLImageProcessorPil as ImageProcessor,
        )
    except ImportError:
        from transformers import Qwen2VLImageProcessor as ImageProcessor
    template = getattr(tokenizer, "chat_template", None)
    try:
        from transformers import Qwen2VLVideoProcessor

        video = Qwen2VLVideoProcessor()
    except Exception:  # torchvision missing: the image-only equivalent
        video = None
    if video is not None:
        return Qwen2VLProcessor(ImageProcessor(), tokenizer, video, chat_template=template)
    return Qwen2VLImageOnlyProcessor(ImageProcessor(), tokenizer, chat_template=template)
