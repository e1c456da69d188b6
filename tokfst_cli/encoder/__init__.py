"""Encoding text to token ids as Hugging Face's ``encode`` does, whole or streamed (Incremental BPE 2026).

    encode   :class:`Encoder`: added tokens, stage P's normalizer and pre-tokenizer, HF's BPE model
    stream   :class:`Stream`: ``feed`` / ``finish`` with eager output
"""
