"""Writes scripts/demo/scene_captions.json: the image tower's training captions with OpenAI CLIP token ids.

Run in the reference environment (openai-clip installed); the GPU machine then needs no tokenizer.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
import reference_env  # noqa: E402,F401
import clip  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_image import caption_list  # noqa: E402

captions = caption_list()
ids = clip.tokenize(captions, truncate=True).tolist()
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "scene_captions.json"), "w") as handle:
    json.dump(dict(zip(captions, ids)), handle)
print(f"{len(captions)} captions")
