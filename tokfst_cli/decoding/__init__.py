"""The decoding runtime every construction implements: the per-step protocol mixin and the Matcher
(bitmasks, forced runs, rollback), the state -> allowed-token index, token healing and the transformers
logits processor. The constructions (stages S and C) build decoders on top of it."""
