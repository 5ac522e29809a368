"""How many inputs the masks page's padded batch holds (masked_batch.py checks it), without torch: a server's first
page reads it."""

MIN_BATCH, MAX_BATCH = 2, 4
