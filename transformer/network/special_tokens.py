"""Special token ids, the same in every tokenizer: each vocabulary starts with these four, so masks,
tasks, training and decoding can name them without knowing which tokenizer built the ids.
"""

PAD, BOS, EOS, UNK = 0, 1, 2, 3
