"""The decoding runtime every construction implements: the per-step protocol mixin and the Matcher
(bitmasks, forced runs, rollback, texts: ``accept_string`` and jump-forward), batches of matchers, the
state -> allowed-token index, token healing and the transformers logits processor. The constructions
(stages S and C) build decoders on top of it."""
