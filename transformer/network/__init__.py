"""The Transformer of "Attention Is All You Need", in plain PyTorch, in the paper's order. Read it so:

1. config.py          ModelConfig: the few numbers and choices every model is built from
2. special_tokens.py  <pad>, <s>, </s>, <unk>; tokenizers.py: text <-> token ids
3. positional.py      positional encodings (sinusoidal, learned; RoPE and ALiBi inside attention)
4. embeddings.py      token embedding * sqrt(d_model) + position
5. attention.py       scaled dot-product attention, multi-head attention
6. masks.py           the padding mask and the causal ("subsequent") mask
7. layers.py          residual + layer norm, feed-forward, the encoder and decoder layers
8. model.py           the stacks, the generator, EncoderDecoder
9. trace.py           AttentionTrace: what a forward pass computed, recorded as it happened
10. decoding.py       greedy decoding step by step, beam search; sampling.py: temperature, top-k, top-p

budget.py estimates what a model costs (memory, time) before any work; it is not part of the paper.
"""
